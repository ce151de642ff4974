/* bench/reserve.c: does reserving a destination's blocks first (fallocate with
 * FALLOC_FL_KEEP_SIZE) make copy_file_range faster? The question behind `copy`'s
 * Ends::reserve (src/engine/walk.rs); the answer is in bench/NOTEBOOK.md#copy-reserved-blocks.
 *
 *   cc -O2 -o reserve bench/reserve.c
 *   ./reserve MODE SRCDIR DSTDIR N    # copies SRCDIR/f0..f{N-1} into DSTDIR (which exists)
 *
 * MODE 0: open, fstat, copy_file_range to the size, close (what xcp does for a file).
 * MODE 1: the same with fallocate(FALLOC_FL_KEEP_SIZE, 0, size) before the copy.
 * Time it with /usr/bin/time, interleaving the modes, with `sync; sleep 2` between runs.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: reserve MODE SRCDIR DSTDIR N\n");
        return 2;
    }
    int mode = atoi(argv[1]), n = atoi(argv[4]);
    char src[4096], dst[4096];
    for (int i = 0; i < n; i++) {
        snprintf(src, sizeof src, "%s/f%d", argv[2], i);
        snprintf(dst, sizeof dst, "%s/f%d", argv[3], i);
        int s = open(src, O_RDONLY | O_CLOEXEC);
        int d = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        struct stat st;
        if (s < 0 || d < 0 || fstat(s, &st) < 0) {
            perror(src);
            return 1;
        }
        if (mode == 1 && fallocate(d, FALLOC_FL_KEEP_SIZE, 0, st.st_size) < 0)
            perror("fallocate");
        for (off_t left = st.st_size; left > 0;) {
            ssize_t r = copy_file_range(s, NULL, d, NULL, left, 0);
            if (r <= 0) {
                perror("copy_file_range");
                return 1;
            }
            left -= r;
        }
        close(s);
        close(d);
    }
    return 0;
}
