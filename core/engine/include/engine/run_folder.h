// Who a run folder belongs to, without LibTorch: the owner record a study writes into each of
// its pretraining folders (`.tupe-run`: experiment, job, fingerprint, and the store relative
// to the folder), so no other study adopts its checkpoints or rewrites its files; and the
// lock `tupe pretrain` holds on its --out folder (flock on `.lock`, which names the holder as
// HOST:PID), so a second process fails at once instead of writing into the same files.
#pragma once

#include <optional>
#include <string>

namespace engine {

/// The owner record of a study's run folder.
struct RunOwner {
    std::string experiment;   ///< The study's name.
    std::string job;          ///< The pretraining job (run name) the folder holds.
    std::string fingerprint;  ///< The job's fingerprint (experiments/job_identity.h).
    std::string store;        ///< The results store, relative to the folder.
};

/// The file name of the owner record inside a run folder.
inline constexpr const char* kRunOwnerFile = ".tupe-run";

/// The folder's owner record; nullopt when it has none. Throws InputError naming the file
/// when it exists but cannot be read or parsed.
std::optional<RunOwner> read_run_owner(const std::string& dir);

/// Writes the owner record atomically (a temporary file, then a rename), creating the
/// folder. Throws InputError naming the file when it cannot.
void write_run_owner(const std::string& dir, const RunOwner& owner);

/// True when the folder holds anything (a file or a folder) besides its owner record and lock.
bool run_folder_has_files(const std::string& dir);

/// An exclusive lock on a run folder, held for the object's lifetime (flock on DIR/.lock, which
/// the holder fills with HOST:PID). The lock dies with its process: a killed run leaves no
/// stale lock behind.
class RunFolderLock {
  public:
    /// Creates the folder and takes its lock; throws InputError naming the folder and the
    /// holder's HOST:PID when another process holds it.
    explicit RunFolderLock(const std::string& dir);
    ~RunFolderLock();
    RunFolderLock(const RunFolderLock&) = delete;
    RunFolderLock& operator=(const RunFolderLock&) = delete;

    /// HOST:PID of the process that holds the folder's lock now; nullopt when nobody does
    /// (or the folder does not exist). Takes and releases the lock to find out.
    static std::optional<std::string> holder(const std::string& dir);

  private:
    int fd_ = -1;
};

}  // namespace engine
