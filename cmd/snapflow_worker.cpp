// snapflow-worker: runs the subtasks a snapflow coordinator deploys on it.
#include "cmd/worker_main.hpp"

int main(int argc, char** argv) { return snapflow::worker_main(argc, argv); }
