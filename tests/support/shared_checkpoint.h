#pragma once
// The tiny-dense checkpoint with the Gemma 4 vocabulary and tokenizer, plus its drafter, written
// once per build of the CLI and shared by every test process that only reads it (the text CLI,
// chat, engine and server suites). CTest runs each test in its own process, and synthesizing the
// pair parses the 16 MB tokenizer and writes 84 MB: seconds per process under the sanitizers.
//
// The pair lives under the system temp dir in a folder named after the CLI binary's path, size and
// mtime: a rebuilt CLI writes a fresh one and removes the one its previous build wrote. An
// exclusive lock on a file beside them makes the first process write it (into a scratch folder
// renamed into place) while the others wait.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>

namespace specula::test {

struct SharedTextPair {
  std::string model;    // tiny-dense, vocab 262144, tokenizer.json + chat template beside it
  std::string drafter;  // its tiny assistant
};

inline const SharedTextPair& shared_text_pair() {
  namespace fs = std::filesystem;
  static const SharedTextPair pair = [] {
    const fs::path binary(SPECULA_BINARY);
    const auto mtime = fs::last_write_time(binary).time_since_epoch();
    const std::string build = "tiny-dense-" + std::to_string(std::hash<std::string>{}(binary.string())) + "-";
    const std::string stamp = std::to_string(fs::file_size(binary)) + "-" +
                              std::to_string(static_cast<unsigned long long>(
                                  std::chrono::duration_cast<std::chrono::nanoseconds>(mtime).count()));
    const fs::path root = fs::temp_directory_path() / "specula-test-shared";
    fs::create_directories(root);
    const fs::path dir = root / (build + stamp);

    const int lock = ::open((root / "lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock < 0 || ::flock(lock, LOCK_EX) != 0)
      throw std::runtime_error("shared_text_pair: cannot lock " + root.string());
    if (!fs::exists(dir / "complete")) {
      const fs::path scratch = root / ("scratch-" + std::to_string(::getpid()));
      fs::remove_all(scratch);
      const std::string cmd = std::string(SPECULA_BINARY) + " synth --preset tiny-dense --vocab 262144 --tokenizer " +
                              SPECULA_TEST_DATA + "/tokenizer-gemma4 --out " + (scratch / "model").string() +
                              " --drafter " + (scratch / "drafter").string() + " > /dev/null 2>&1";
      const bool written = std::system(cmd.c_str()) == 0;
      if (written) {
        ::close(::open((scratch / "complete").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
        for (const auto& old : fs::directory_iterator(root)) {
          if (old.path().filename().string().rfind(build, 0) == 0) fs::remove_all(old.path());
        }
        fs::rename(scratch, dir);
      }
      fs::remove_all(scratch);
      if (!written) {
        ::close(lock);
        throw std::runtime_error("shared_text_pair: `specula synth` failed");
      }
    }
    ::close(lock);  // releases the lock
    return SharedTextPair{(dir / "model").string(), (dir / "drafter").string()};
  }();
  return pair;
}

}  // namespace specula::test
