#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace rocksdb {
class DB;
class SstFileWriter;
class Status;
}  // namespace rocksdb

namespace snapflow {

// Puts records into a RocksDB instance without its write path (Flink's restore by SST
// ingestion): they are written in ascending key order into SST files in a scratch folder and
// the files are then ingested, linked into the instance as they are. No memtable, no flushes,
// and no compaction of what a restore writes: a restore costs one sequential write of the data.
//
// A file is finished once it holds about `file_bytes` of keys and values, so memory stays
// bounded (a writer buffers one block) however much is restored. The files follow one another in
// key order and never overlap, so they go in with one ingestion.
//
// Ingested data is newer than everything already in the instance: it wins over the point and
// range deletes (a restore's clear, a rescale's cut) that cover its keys.
//
// The scratch folder is created on the first record and removed when this goes, whether the
// ingestion happened, failed, or never ran.
class rocksdb_sst_ingestion {
 public:
  static constexpr std::size_t default_file_bytes = std::size_t{64} << 20;

  rocksdb_sst_ingestion(rocksdb::DB& db, std::filesystem::path scratch,
                        std::size_t file_bytes = default_file_bytes);
  ~rocksdb_sst_ingestion();
  rocksdb_sst_ingestion(const rocksdb_sst_ingestion&) = delete;
  rocksdb_sst_ingestion& operator=(const rocksdb_sst_ingestion&) = delete;

  // Adds a record. Keys come in strictly ascending bytewise order over every call (RocksDB
  // refuses anything else: an error, nothing written).
  result<void> add(std::string_view key, std::string_view value);
  // Finishes the last file and ingests every file. Nothing happens when no record was added (an
  // empty SST file cannot be written). Once only.
  result<void> ingest();

  // How many files were written so far (tests).
  std::size_t files() const { return finished_.size() + (writer_ ? 1 : 0); }

 private:
  result<void> start_file();
  result<void> finish_file();
  error failure(const std::string& what, const rocksdb::Status& s) const;

  rocksdb::DB& db_;
  std::filesystem::path scratch_;
  std::size_t file_bytes_;
  std::unique_ptr<rocksdb::SstFileWriter> writer_;  // the open file, if any
  std::size_t in_file_ = 0;                         // its bytes so far
  std::vector<std::string> finished_;
  // Per finished file, the checksum RocksDB computed as it wrote it and its function's name
  // (with the instance's file_checksum_gen_factory; empty without).
  std::vector<std::string> checksums_;
  std::vector<std::string> checksum_names_;
  bool ingested_ = false;
};

}  // namespace snapflow
