namespace snapflow {}
