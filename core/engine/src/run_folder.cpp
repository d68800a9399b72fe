// Run folder owners and locks (see run_folder.h).
#include "engine/run_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/errors.h"

namespace engine {

namespace fs = std::filesystem;

namespace {

constexpr const char* kLockFile = ".lock";

std::string host_pid() {
    char name[256] = {0};
    gethostname(name, sizeof name - 1);
    return std::string(name) + ":" + std::to_string(getpid());
}

std::string read_all(int fd) {
    std::string text;
    char buf[256];
    if (::lseek(fd, 0, SEEK_SET) < 0) return text;
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
        text.append(buf, static_cast<size_t>(n));
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    return text;
}

}  // namespace

std::optional<RunOwner> read_run_owner(const std::string& dir) {
    const fs::path file = fs::path(dir) / kRunOwnerFile;
    std::error_code error;
    if (!fs::exists(file, error)) return std::nullopt;
    std::ifstream in(file);
    if (!in) throw InputError(file.string(), "cannot read the run folder's owner record");
    RunOwner owner;
    std::string line;
    long number = 0;
    while (std::getline(in, line)) {
        ++number;
        if (line.empty()) continue;
        const auto eq = line.find('=');
        if (eq == std::string::npos)
            throw InputError(file.string() + ":" + std::to_string(number),
                             "expected key=value in the run folder's owner record");
        const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
        if (key == "experiment") owner.experiment = value;
        if (key == "job") owner.job = value;
        if (key == "fingerprint") owner.fingerprint = value;
        if (key == "store") owner.store = value;
    }
    if (owner.experiment.empty())
        throw InputError(file.string(), "the run folder's owner record names no experiment");
    return owner;
}

void write_run_owner(const std::string& dir, const RunOwner& owner) {
    std::error_code error;
    fs::create_directories(dir, error);
    const fs::path file = fs::path(dir) / kRunOwnerFile;
    if (error) throw InputError(dir, "cannot create the run folder: " + error.message());
    const fs::path tmp = file.string() + ".tmp." + std::to_string(getpid());
    {
        std::ofstream out(tmp);
        out << "experiment=" << owner.experiment << "\njob=" << owner.job
            << "\nfingerprint=" << owner.fingerprint << "\nstore=" << owner.store << "\n";
        out.flush();
        if (!out) throw InputError(tmp.string(), "cannot write the run folder's owner record");
    }
    fs::rename(tmp, file, error);
    if (error) throw InputError(file.string(), "cannot write: " + error.message());
}

bool run_folder_has_files(const std::string& dir) {
    std::error_code error;
    for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
        const std::string name = it->path().filename().string();
        if (name != kRunOwnerFile && name != kLockFile) return true;
    }
    return false;
}

RunFolderLock::RunFolderLock(const std::string& dir) {
    std::error_code error;
    fs::create_directories(dir, error);
    if (error) throw InputError(dir, "cannot create the folder: " + error.message());
    const std::string path = (fs::path(dir) / kLockFile).string();
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
        throw InputError(path, std::string("cannot open the lock: ") + std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        const std::string who = read_all(fd_);
        ::close(fd_);
        fd_ = -1;
        throw InputError(dir, "is in use by " +
                                  (who.empty() ? std::string("another process") : who) +
                                  " (another `tupe pretrain` or study writes it); wait for it "
                                  "or choose another output folder");
    }
    const std::string me = host_pid() + "\n";
    if (::ftruncate(fd_, 0) == 0 && ::lseek(fd_, 0, SEEK_SET) == 0) {
        const ssize_t written = ::write(fd_, me.data(), me.size());
        (void)written;  // the holder's name is informative; the flock is the lock
    }
}

RunFolderLock::~RunFolderLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the flock
}

std::optional<std::string> RunFolderLock::holder(const std::string& dir) {
    const std::string path = (fs::path(dir) / kLockFile).string();
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    std::optional<std::string> who;
    if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
        const std::string text = read_all(fd);
        who = text.empty() ? std::string("another process") : text;
    }
    ::close(fd);
    return who;
}

}  // namespace engine
