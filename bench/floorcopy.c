/* floorcopy: the least a tree copier can do, as a floor to measure copiers against
 * (bench/NOTEBOOK.md, "copy: trees, measured").
 *
 *   floorcopy JOBS SRC DST
 *     SRC holds directories of regular files and directories (bench/lib/trees.py's
 *     shapes). Creates DST and its top directories, then JOBS processes copy the rest, top
 *     directory i going to process i % JOBS (deeper ones made with mkdirat as met): per
 *     file openat the source, openat the destination O_CREAT|O_EXCL, copy_file_range until
 *     it says 0, close both -- seven syscalls for a small file (zerocat and cpz stop at the
 *     size: six). No metadata, no report, no checks: not a tool, a floor.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char *what, const char *path) {
    perror(path ? path : what);
    exit(1);
}

static void copy_dir(int sdir, int ddir) {
    DIR *d = fdopendir(dup(sdir));
    if (!d) die("fdopendir", NULL);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (e->d_type == DT_DIR) {
            if (mkdirat(ddir, e->d_name, 0755)) die("mkdir", e->d_name);
            int s = openat(sdir, e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            int t = openat(ddir, e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (s < 0 || t < 0) die("open dir", e->d_name);
            copy_dir(s, t);
            close(s);
            close(t);
            continue;
        }
        int a = openat(sdir, e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (a < 0) die("open", e->d_name);
        int b = openat(ddir, e->d_name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (b < 0) die("create", e->d_name);
        ssize_t n;
        while ((n = copy_file_range(a, NULL, b, NULL, 1 << 30, 0)) > 0) {
        }
        if (n < 0) die("copy_file_range", e->d_name);
        close(a);
        close(b);
    }
    closedir(d);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: floorcopy JOBS SRC DST\n");
        return 2;
    }
    int jobs = atoi(argv[1]);
    if (mkdir(argv[3], 0755)) die("mkdir", argv[3]);
    DIR *top = opendir(argv[2]);
    if (!top) die("opendir", argv[2]);
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(top))) {
        if (e->d_name[0] == '.') continue;
        names = realloc(names, (n + 1) * sizeof *names);
        names[n] = strdup(e->d_name);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[3], names[n]);
        if (mkdir(path, 0755)) die("mkdir", path);
        n++;
    }
    for (int j = 0; j < jobs; j++) {
        if (fork() == 0) {
            for (size_t i = j; i < n; i += jobs) {
                char s[4096], d[4096];
                snprintf(s, sizeof s, "%s/%s", argv[2], names[i]);
                snprintf(d, sizeof d, "%s/%s", argv[3], names[i]);
                int sd = open(s, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                int dd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (sd < 0 || dd < 0) die("open dir", s);
                copy_dir(sd, dd);
                close(sd);
                close(dd);
            }
            _exit(0);
        }
    }
    int status, failed = 0;
    while (wait(&status) > 0)
        failed |= !WIFEXITED(status) || WEXITSTATUS(status);
    return failed;
}
