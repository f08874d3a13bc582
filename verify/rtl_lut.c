/* rtl_lut.c - mts_rtl_lut_verified: a Verilog design's table, swept,
 * verified against the design and cached, as one library call (and
 * mts_rtl_acc_verified: an accumulator design verified against FMAq,
 * cached the same way). It is what
 * `mantis flow` does with a design (lutgen, then verify of that table),
 * for front ends (python/mantis) that want the fast LUT GEMM together with
 * the proof that the table equals the RTL bit for bit.
 *
 * Cache entry (root = $MANTIS_CACHE/lut, fs.h): root/<key>/table.lut (not
 * for accumulators) and root/<key>/verify.json. key hashes the Verilated model's key (sources,
 * top, parameters, Mantis and tool versions: rtl.h), the kind and the
 * integer reading. An entry is built in root/build-<key>-<pid> and
 * published with one rename; it is trusted only when the table loads (its
 * CRC) and the report parses and says bit-exact, else rebuilt. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mantis/fs.h"
#include "mantis/hash.h"
#include "mantis/json.h"
#include "mantis/verify.h"

/* The entry's key: 32 hex digits. */
static void entry_key(const mts_rtl_info *in, char key[33])
{
    mts_hash128 h;
    char tail[64];
    mts_hash128_init(&h);
    mts_hash128_str(&h, "mantis-rtl-lut-1");
    mts_hash128_str(&h, MANTIS_VERSION);
    mts_hash128_str(&h, in->hash);
    snprintf(tail, sizeof tail, "kind=%d signed=%d", (int)in->kind, in->int_signed);
    mts_hash128_str(&h, tail);
    mts_hash128_hex(&h, key);
}

/* Loads a published entry: MTS_OK with *lut (none for lut NULL: an
 * accumulator design's entry is its report) and the report's counts, or an
 * error when it is missing or not trustworthy (the caller rebuilds it). */
static int load_entry(const char *dir, mts_lut *lut, mts_rtl_lut_report *rep)
{
    char lp[1100], jp[1100];
    if (mts_fs_pathf(lp, sizeof lp, "%s/table.lut", dir) || mts_fs_pathf(jp, sizeof jp, "%s/verify.json", dir))
        return MTS_EINVAL;
    if ((lut && !mts_fs_exists(lp)) || !mts_fs_exists(jp)) return MTS_EIO;
    mts_json *j = mts_json_load(jp);
    if (!j) return MTS_EFORMAT;
    int ok = !strcmp(mts_json_str(j, "result", ""), "bit-exact") && mts_json_num(j, "mismatches", -1) == 0;
    rep->cases = (uint64_t)mts_json_num(j, "cases", 0);
    rep->mismatches = 0;
    mts_json_free(j);
    if (!ok) return MTS_EFORMAT;
    mts_err e;
    if (lut && mts_lut_load(lp, lut, &e) != MTS_OK) return MTS_EFORMAT;
    if (lut) memcpy(rep->lut_path, lp, sizeof lp);
    memcpy(rep->json_path, jp, sizeof jp);
    return MTS_OK;
}

/* Sweeps, writes and verifies the table in scratch directory tmp (lut
 * NULL: an accumulator design, verified against the FMAq model). */
static int build_entry(mts_rtl *r, const char *path, const char *tmp, mts_lut *lut, mts_rtl_lut_report *rep,
                       mts_err *err)
{
    char lp[1100], jp[1100];
    if (mts_fs_pathf(lp, sizeof lp, "%s/table.lut", tmp) || mts_fs_pathf(jp, sizeof jp, "%s/verify.json", tmp))
        return mts_fail(err, MTS_EINVAL, "LUT cache path too long: %s", tmp);
    int rc = mts_fs_mkdirs(tmp, err);
    if (rc != MTS_OK) return rc;
    if (lut) {
        if ((rc = mts_rtl_lut(r, lut, err)) != MTS_OK) return rc; /* MTS_ENOTLUT names the pair */
        if ((rc = mts_lut_save(lut, lp, err)) != MTS_OK) return rc;
    }
    /* the design against the table as written and read back, or FMAq (verify.h) */
    mts_verify_opts vo;
    memset(&vo, 0, sizeof vo);
    vo.lut_path = lut ? lp : NULL;
    vo.json_path = jp;
    vo.max_report = 5;
    vo.design = path;
    mts_verify_result res;
    if ((rc = mts_verify_rtl(r, &vo, &res, err)) != MTS_OK) return rc;
    rep->cases = res.cases;
    rep->mismatches = res.mismatches;
    if (res.mismatches || res.not_representable)
        return mts_fail(err, MTS_EMISMATCH, "%s: the design differs from %s in %llu of %llu cases", path,
                        lut ? "its swept table" : "the FMAq model", (unsigned long long)res.mismatches,
                        (unsigned long long)res.cases);
    return MTS_OK;
}

/* Both entry points: lut NULL for an accumulator design. */
static int verified(const mts_rtl_opts *o, mts_lut *lut, mts_rtl_lut_report *rep, mts_err *err)
{
    if (lut) memset(lut, 0, sizeof *lut);
    memset(rep, 0, sizeof *rep);
    mts_rtl *r;
    int rc = mts_rtl_open(o, &r, err);
    if (rc != MTS_OK) return rc;
    rep->info = *mts_rtl_get_info(r);
    if (lut && rep->info.kind == MTS_RTL_ACC) {
        mts_rtl_close(r);
        return mts_fail(err, MTS_EINVAL,
                        "%s: an accumulator design has no multiplier table (use it as the accumulator of a "
                        "multiplier, or train it as --mul exact with --acc in its formats)", o->path);
    }
    if (!lut && rep->info.kind != MTS_RTL_ACC) {
        mts_rtl_close(r);
        return mts_fail(err, MTS_EINVAL, "%s: a %s design, not an accumulator (ports p, s -> y)", o->path,
                        mts_rtl_kind_name(rep->info.kind));
    }
    char root[1024], key[33], dir[1100], tmp[1100];
    if ((rc = mts_fs_cache_dir("lut", root, sizeof root, err)) != MTS_OK) goto done;
    entry_key(&rep->info, key);
    if (mts_fs_pathf(dir, sizeof dir, "%s/%s", root, key) ||
        mts_fs_pathf(tmp, sizeof tmp, "%s/build-%s-%ld", root, key, (long)getpid())) {
        rc = mts_fail(err, MTS_EINVAL, "LUT cache path too long: %s", root);
        goto done;
    }
    if (load_entry(dir, lut, rep) == MTS_OK) {
        rep->lut_cache_hit = 1;
        goto done;
    }
    mts_fs_rmtree(dir); /* missing, or not to be trusted */
    mts_fs_rmtree(tmp);
    rc = build_entry(r, o->path, tmp, lut, rep, err);
    if (rc == MTS_OK && rename(tmp, dir) != 0) {
        if (lut) mts_lut_free(lut); /* another process published first: its entry is as good */
        if (load_entry(dir, lut, rep) != MTS_OK) rc = mts_fail(err, MTS_EIO, "cannot publish the LUT cache entry %s", dir);
    }
    if (rc == MTS_EMISMATCH) { /* keep the report where the message says */
        char jp[1100], kept[1100];
        if (!mts_fs_pathf(jp, sizeof jp, "%s/verify.json", tmp) &&
            !mts_fs_pathf(kept, sizeof kept, "%s/%s-mismatch.json", root, key) && rename(jp, kept) == 0) {
            size_t l = strlen(err->msg);
            snprintf(err->msg + l, sizeof err->msg - l, " (report: %s)", kept);
        }
    }
    if (rc == MTS_OK && ((lut && mts_fs_pathf(rep->lut_path, sizeof rep->lut_path, "%s/table.lut", dir)) ||
                         mts_fs_pathf(rep->json_path, sizeof rep->json_path, "%s/verify.json", dir)))
        rc = mts_fail(err, MTS_EINVAL, "LUT cache path too long: %s", dir);
    if (rc != MTS_OK && lut) mts_lut_free(lut);
    mts_fs_rmtree(tmp);
done:
    mts_rtl_close(r);
    return rc;
}

int mts_rtl_lut_verified(const mts_rtl_opts *o, mts_lut *lut, mts_rtl_lut_report *rep, mts_err *err)
{
    return verified(o, lut, rep, err);
}

int mts_rtl_acc_verified(const mts_rtl_opts *o, mts_rtl_lut_report *rep, mts_err *err)
{
    return verified(o, NULL, rep, err);
}
