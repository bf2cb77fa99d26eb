#include "engine/state/rocksdb_sst_ingestion.hpp"

#include <algorithm>
#include <system_error>

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/sst_file_writer.h>

namespace snapflow {

rocksdb_sst_ingestion::rocksdb_sst_ingestion(rocksdb::DB& db, std::filesystem::path scratch,
                                             std::size_t file_bytes)
    : db_(db), scratch_(std::move(scratch)), file_bytes_(file_bytes) {}

rocksdb_sst_ingestion::~rocksdb_sst_ingestion() {
  writer_.reset();  // an unfinished file is abandoned with its folder
  std::error_code ec;
  std::filesystem::remove_all(scratch_, ec);
}

error rocksdb_sst_ingestion::failure(const std::string& what, const rocksdb::Status& s) const {
  return error{"restoring rocksdb state through SST files in " + scratch_.string() + ": " +
               what + " failed: " + s.ToString()};
}

result<void> rocksdb_sst_ingestion::start_file() {
  if (finished_.empty()) {
    // A leftover of an earlier restore whose process died goes first.
    std::error_code ec;
    std::filesystem::remove_all(scratch_, ec);
    std::filesystem::create_directories(scratch_, ec);
    if (ec) return error{"cannot create " + scratch_.string() + ": " + ec.message()};
  }
  // The instance's own options: its comparator, table format, filters and compression. The
  // file's pages stay cached (RocksDB drops them by default): the instance reads them as soon
  // as they are ingested, and the next checkpoint links them and a restore reads them back.
  auto writer = std::make_unique<rocksdb::SstFileWriter>(
      rocksdb::EnvOptions(), db_.GetOptions(), /*column_family=*/nullptr,
      /*invalidate_page_cache=*/false);
  const std::string name =
      (scratch_ / ("ingest-" + std::to_string(finished_.size()) + ".sst")).string();
  const rocksdb::Status s = writer->Open(name);
  if (!s.ok()) return failure("opening " + name, s);
  writer_ = std::move(writer);
  in_file_ = 0;
  return success();
}

result<void> rocksdb_sst_ingestion::finish_file() {
  if (!writer_) return success();
  rocksdb::ExternalSstFileInfo info;
  const rocksdb::Status s = writer_->Finish(&info);
  writer_.reset();
  if (!s.ok()) return failure("finishing an SST file", s);
  finished_.push_back(info.file_path);
  checksums_.push_back(info.file_checksum);
  checksum_names_.push_back(info.file_checksum_func_name);
  return success();
}

result<void> rocksdb_sst_ingestion::add(std::string_view key, std::string_view value) {
  if (ingested_) return error{"records added to " + scratch_.string() + " after its ingestion"};
  if (!writer_)
    if (auto r = start_file(); !r) return r;
  const rocksdb::Status s = writer_->Put(rocksdb::Slice(key.data(), key.size()),
                                         rocksdb::Slice(value.data(), value.size()));
  if (!s.ok()) return failure("writing a record", s);
  in_file_ += key.size() + value.size();
  if (in_file_ >= file_bytes_) return finish_file();
  return success();
}

result<void> rocksdb_sst_ingestion::ingest() {
  if (ingested_) return error{"the SST files in " + scratch_.string() + " were ingested twice"};
  ingested_ = true;
  if (auto r = finish_file(); !r) return r;
  if (finished_.empty()) return success();
  rocksdb::IngestExternalFileArg arg;
  arg.column_family = db_.DefaultColumnFamily();
  arg.external_files = finished_;
  rocksdb::IngestExternalFileOptions& o = arg.options;
  // Linked into the instance (the scratch folder is inside its working folder, one filesystem).
  o.move_files = true;
  // Data already in the instance over the same keys (range deletes of a restore's clear or of a
  // rescale's cut, or the records they cover) is older: the files get a sequence number above
  // it, recorded in the MANIFEST, never written into the files (linked, they are read-only).
  o.allow_global_seqno = true;
  o.write_global_seqno = false;
  // Whatever the memtable holds over the files' keys (a restore's clear, records written
  // before the restore) is flushed first, so that it is older than the files too.
  o.allow_blocking_flush = true;
  // Behind would put the files below the deletes that must not hide them.
  o.ingest_behind = false;
  // A snapshot taken before the restore never sees the restored records.
  o.snapshot_consistency = true;
  // The checksums the writer computed go into the MANIFEST as they are (an incremental
  // checkpoint takes them from there), so the files are not read once more for them.
  const auto has = [](const std::string& c) { return !c.empty(); };
  if (std::all_of(checksums_.begin(), checksums_.end(), has) &&
      std::all_of(checksum_names_.begin(), checksum_names_.end(), has)) {
    arg.files_checksums = checksums_;
    arg.files_checksum_func_names = checksum_names_;
    o.verify_file_checksum = false;
  }
  const rocksdb::Status s = db_.IngestExternalFiles({arg});
  if (!s.ok()) return failure("ingesting " + std::to_string(finished_.size()) + " SST files", s);
  return success();
}

}  // namespace snapflow
