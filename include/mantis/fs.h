/* fs.h - the file-system helpers every layer uses: whole-file reads, atomic
 * writes (temp file in the same directory + fsync + rename: either the old
 * file or the complete new one is there, never a partial one), directories,
 * bounded path formatting and the cache root. */
#ifndef MANTIS_FS_H
#define MANTIS_FS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads the whole file into a malloc'd buffer of *len bytes plus a NUL (so
 * text can be used as a string; caller frees). Only regular files are read:
 * a directory, fifo, device or socket is refused with MTS_EIO (opened
 * non-blocking, so a fifo never hangs the reader, and /dev/zero never fills
 * memory). MTS_EIO names the file and the system error; MTS_ENOMEM. */
int mts_fs_read(const char *path, uint8_t **buf, size_t *len, mts_err *err);

/* MTS_OK if path does not exist or is a regular file (or a link to one);
 * MTS_EIO when it is a directory, device, fifo or socket: outputs never
 * replace those (as root, rename would turn /dev/full into a plain file). */
int mts_fs_check_output(const char *path, mts_err *err);

/* Writes n parts (data[i], len[i]) to path atomically (see above). Every
 * write, the fsync and the rename are checked: on failure (ENOSPC, EIO) one
 * line names path and the error, the temp file is removed and path is left
 * as it was; MTS_ENOSPC when the disk is full (ENOSPC, EDQUOT), else
 * MTS_EIO. Refuses outputs mts_fs_check_output refuses. Test hook:
 * MANTIS_FAULT_WRITE=N fails the process's Nth write/fsync/rename here with
 * ENOSPC ("N:eio" for EIO; "N:kill" writes half, then the process SIGKILLs
 * itself). */
int mts_fs_write_atomic(const char *path, int n, const void *const *data, const size_t *len, mts_err *err);
/* Bytes this process can still write on the file system holding path (as
 * root, the blocks reserved for root count too), or -1 when unknown. A tool
 * that does not check its writes (Verilator 5 exits 0 after writing empty
 * files to a full disk) is caught by looking here after it ran. */
long long mts_fs_free_bytes(const char *path);

/* Removes the temp files (NAME.tmp.PID) that writers killed in the middle
 * of mts_fs_write_atomic left in dir, those whose process no longer exists.
 * Returns how many were removed. */
int mts_fs_clean_stale_tmp(const char *dir);

/* Writes a NUL-terminated text atomically. */
int mts_fs_write_text(const char *path, const char *text, mts_err *err);

/* Copies src's bytes to dst atomically (fs_read + fs_write_atomic). */
int mts_fs_copy(const char *src, const char *dst, mts_err *err);

/* Renders fn(f, ctx) into memory, then writes it to path atomically, so a
 * report appears complete or not at all. MTS_ENOMEM, or fs_write_atomic's codes. */
int mts_fs_write_stream(const char *path, void (*fn)(FILE *f, void *ctx), void *ctx, mts_err *err);

/* mkdir -p with mode 0755. MTS_EIO (MTS_ENOSPC: a full disk) names the component that failed;
 * MTS_EINVAL when the path is too long. */
int mts_fs_mkdirs(const char *path, mts_err *err);
/* rm -r (does not follow links). Returns 0, or -1 when something remained. */
int mts_fs_rmtree(const char *path);
/* 1 if path exists (any type), else 0. */
int mts_fs_exists(const char *path);

/* snprintf into a path buffer: 0 when it fit, -1 when it would have been
 * truncated (a path is never silently cut short). */
int mts_fs_pathf(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The cache directory for `sub` ("rtl", "synth", ...): $MANTIS_CACHE/sub,
 * else $XDG_CACHE_HOME/mantis/sub, else $HOME/.cache/mantis/sub, else
 * /tmp/mantis-cache/sub. Not created. MTS_EINVAL when it does not fit. */
int mts_fs_cache_dir(const char *sub, char *buf, size_t n, mts_err *err);

#ifdef __cplusplus
}
#endif
#endif
