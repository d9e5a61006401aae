// A fresh temporary directory per test case and process, removed afterwards.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace test {

struct scoped_dir {
  // <temp>/dimsum_<name>_<pid>, empty.
  explicit scoped_dir(const std::string& name)
      : path(std::filesystem::temp_directory_path() / ("dimsum_" + name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~scoped_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  scoped_dir(const scoped_dir&) = delete;
  scoped_dir& operator=(const scoped_dir&) = delete;
  std::filesystem::path operator/(const std::string& s) const { return path / s; }
  std::string str() const { return path.string(); }
  std::filesystem::path path;
};

}  // namespace test
