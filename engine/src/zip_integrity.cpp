// Zip integrity check for checkpoints (see zip_integrity.h). Follows PKWARE's APPNOTE.TXT:
// end of central directory (4.3.16), zip64 locator and record (4.3.14-15), central directory
// headers (4.3.12), local headers (4.3.7) and the zip64 extra field (4.5.3).
#include "zip_integrity.h"

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <vector>

#include "engine/errors.h"

namespace engine::detail {

namespace {

uint32_t crc32_update(uint32_t crc, const unsigned char* data, size_t n) {
    return static_cast<uint32_t>(::crc32(crc, data, static_cast<uInt>(n)));
}

uint64_t le(const unsigned char* p, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

class ZipFile {
  public:
    explicit ZipFile(const std::string& path) : path_(path), in_(path, std::ios::binary) {
        if (!in_) throw CheckpointError(path, "cannot open checkpoint file");
        in_.seekg(0, std::ios::end);
        size_ = static_cast<uint64_t>(in_.tellg());
    }
    uint64_t size() const { return size_; }

    std::vector<unsigned char> read(uint64_t offset, uint64_t n, const char* what) {
        if (offset > size_ || n > size_ - offset)
            fail(std::string(what) + " lies past the end of the file (truncated?)");
        std::vector<unsigned char> buf(n);
        in_.clear();
        in_.seekg(static_cast<std::streamoff>(offset));
        in_.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(n));
        if (!in_) fail(std::string("cannot read ") + what);
        return buf;
    }

    uint32_t crc(uint64_t offset, uint64_t n) {
        if (offset > size_ || n > size_ - offset)
            fail("entry data lies past the end of the file (truncated?)");
        std::vector<char> buf(1 << 20);
        in_.clear();
        in_.seekg(static_cast<std::streamoff>(offset));
        uint32_t c = 0;
        while (n > 0) {
            const auto chunk = static_cast<std::streamsize>(std::min<uint64_t>(n, buf.size()));
            in_.read(buf.data(), chunk);
            if (!in_) fail("cannot read entry data");
            c = crc32_update(c, reinterpret_cast<const unsigned char*>(buf.data()),
                             static_cast<size_t>(chunk));
            n -= static_cast<uint64_t>(chunk);
        }
        return c;
    }

    /// CRC-32 of the raw-deflated (method 8) entry at `offset`, `n` compressed bytes, which
    /// must inflate to exactly `expected_size` bytes.
    uint32_t inflated_crc(uint64_t offset, uint64_t n, uint64_t expected_size,
                          const std::string& name) {
        const auto packed = read(offset, n, "entry data");
        z_stream z{};
        if (inflateInit2(&z, -MAX_WBITS) != Z_OK) fail("zlib initialisation failed");
        std::vector<unsigned char> out(1 << 16);
        uint32_t c = 0;
        uint64_t total = 0;
        z.next_in = const_cast<unsigned char*>(packed.data());
        z.avail_in = static_cast<uInt>(packed.size());
        int rc = Z_OK;
        while (rc == Z_OK) {
            z.next_out = out.data();
            z.avail_out = static_cast<uInt>(out.size());
            rc = inflate(&z, Z_NO_FLUSH);
            const size_t got = out.size() - z.avail_out;
            c = crc32_update(c, out.data(), got);
            total += got;
            if (rc == Z_OK && got == 0 && z.avail_in == 0) rc = Z_DATA_ERROR;  // truncated stream
        }
        inflateEnd(&z);
        if (rc != Z_STREAM_END || total != expected_size)
            fail("entry '" + name + "' does not inflate to its recorded size");
        return c;
    }

    [[noreturn]] void fail(const std::string& message) const {
        throw CheckpointError(path_, "corrupted checkpoint: " + message);
    }

  private:
    std::string path_;
    std::ifstream in_;
    uint64_t size_ = 0;
};

}  // namespace

void verify_zip_integrity(const std::string& path) {
    ZipFile zip(path);
    const uint64_t size = zip.size();
    if (size < 22) zip.fail("too short for a zip archive");
    // The end-of-central-directory record: 22 bytes plus a comment of up to 65535.
    const uint64_t tail_len = std::min<uint64_t>(size, 22 + 65535);
    const auto tail = zip.read(size - tail_len, tail_len, "end of archive");
    int64_t eocd = -1;
    for (int64_t i = static_cast<int64_t>(tail_len) - 22; i >= 0; --i)
        if (le(&tail[i], 4) == 0x06054b50u) {
            eocd = i;
            break;
        }
    if (eocd < 0) zip.fail("no end-of-central-directory record (not a zip archive, or truncated)");
    const unsigned char* e = &tail[eocd];
    uint64_t entries = le(e + 10, 2), cd_size = le(e + 12, 4), cd_offset = le(e + 16, 4);
    if (entries == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_offset == 0xFFFFFFFFu) {
        // zip64: a 20-byte locator sits just before the classic record.
        const uint64_t eocd_abs = size - tail_len + static_cast<uint64_t>(eocd);
        if (eocd_abs < 20) zip.fail("zip64 locator missing");
        const auto loc = zip.read(eocd_abs - 20, 20, "zip64 locator");
        if (le(loc.data(), 4) != 0x07064b50u) zip.fail("zip64 locator missing");
        const auto rec = zip.read(le(loc.data() + 8, 8), 56, "zip64 end record");
        if (le(rec.data(), 4) != 0x06064b50u) zip.fail("bad zip64 end record");
        entries = le(rec.data() + 32, 8);
        cd_size = le(rec.data() + 40, 8);
        cd_offset = le(rec.data() + 48, 8);
    }
    if (entries == 0) zip.fail("the archive is empty");
    const auto cd = zip.read(cd_offset, cd_size, "central directory");
    uint64_t pos = 0;
    for (uint64_t n = 0; n < entries; ++n) {
        if (pos + 46 > cd.size() || le(&cd[pos], 4) != 0x02014b50u)
            zip.fail("bad central directory entry " + std::to_string(n));
        const unsigned char* h = &cd[pos];
        const uint64_t method = le(h + 10, 2), crc = le(h + 16, 4);
        uint64_t comp = le(h + 20, 4), uncomp = le(h + 24, 4), local = le(h + 42, 4);
        const uint64_t name_len = le(h + 28, 2), extra_len = le(h + 30, 2),
                       comment_len = le(h + 32, 2);
        if (pos + 46 + name_len + extra_len + comment_len > cd.size())
            zip.fail("bad central directory entry " + std::to_string(n));
        const std::string name(reinterpret_cast<const char*>(h + 46), name_len);
        // The zip64 extra field holds, in this order, the 32-bit fields that are all ones.
        const unsigned char* x = h + 46 + name_len;
        for (uint64_t off = 0; off + 4 <= extra_len;) {
            const uint64_t id = le(x + off, 2), len = le(x + off + 2, 2);
            if (off + 4 + len > extra_len) break;
            if (id == 0x0001) {
                uint64_t q = off + 4;
                auto next = [&](uint64_t& field) {
                    if (field != 0xFFFFFFFFu) return;
                    if (q + 8 > off + 4 + len) zip.fail("bad zip64 field of entry '" + name + "'");
                    field = le(x + q, 8);
                    q += 8;
                };
                next(uncomp);
                next(comp);
                next(local);
            }
            off += 4 + len;
        }
        const auto lh = zip.read(local, 30, "local header");
        if (le(lh.data(), 4) != 0x04034b50u) zip.fail("bad local header of entry '" + name + "'");
        const uint64_t data = local + 30 + le(lh.data() + 26, 2) + le(lh.data() + 28, 2);
        // Tensor data is stored; PyTorch deflates the small code/ and pickle entries.
        uint32_t actual = 0;
        if (method == 0) {
            if (comp != uncomp) zip.fail("entry '" + name + "' has inconsistent sizes");
            actual = zip.crc(data, comp);
        } else if (method == 8) {
            actual = zip.inflated_crc(data, comp, uncomp, name);
        } else {
            zip.fail("entry '" + name + "' uses compression method " + std::to_string(method));
        }
        if (actual != crc) zip.fail("entry '" + name + "' fails its CRC-32 check");
        pos += 46 + name_len + extra_len + comment_len;
    }
}

}  // namespace engine::detail
