
use builtin;
use str;

set edit:completion:arg-completer[zerocat] = {|@words|
    fn spaces {|n|
        builtin:repeat $n ' ' | str:join ''
    }
    fn cand {|text desc|
        edit:complex-candidate $text &display=$text' '(spaces (- 14 (wcswidth $text)))$desc
    }
    var command = 'zerocat'
    for word $words[1..-1] {
        if (str:has-prefix $word '-') {
            break
        }
        set command = $command';'$word
    }
    var completions = [
        &'zerocat'= {
            cand --via 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload'
            cand --stats 'Format of the end-of-run report on stderr'
            cand -L 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay refuses it (usage error) rather than ignore it. After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)'
            cand --limit 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay refuses it (usage error) rather than ignore it. After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)'
            cand --stats-fd 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)'
            cand --size 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own'
            cand -q 'No report line, no progress'
            cand --quiet 'No report line, no progress'
            cand -v 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
            cand --verbose 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
            cand --progress 'Show a progress bar on stderr (default: only when stderr is a terminal)'
            cand --no-progress 'Never show a progress bar'
            cand --explain 'Print the plan and exit without moving data'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
            cand pipe 'Move one stream from SRC to DST'
            cand copy 'Copy files and trees: reflink, then copy_file_range, splice, userspace'
            cand tee 'Send every byte of SRC to every DST (files, pipes, sockets, listeners)'
            cand relay 'Relay bytes both ways between A and B; a listener serves every connection'
            cand probe 'Is something answering? Connect to each TARGET and close at once (nc -z, wait-for-it)'
            cand completions 'Print a shell completion script'
            cand man 'Print the man page (roff)'
            cand version 'Print the version; with -v, also the commit, the kernel and what it offers (for a bug report)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'zerocat;pipe'= {
            cand --grace 'After SIGINT/SIGTERM, an exec:/sh: child gets SIGTERM, then SIGKILL after this long'
            cand --idle-timeout 'A UDP source (udp-listen:, udp:) ends after this long without a datagram (nc -u -w); without it, an empty datagram or a signal ends it'
            cand --via 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload'
            cand --stats 'Format of the end-of-run report on stderr'
            cand -L 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay refuses it (usage error) rather than ignore it. After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)'
            cand --limit 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay refuses it (usage error) rather than ignore it. After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)'
            cand --stats-fd 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)'
            cand --size 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own'
            cand -q 'No report line, no progress'
            cand --quiet 'No report line, no progress'
            cand -v 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
            cand --verbose 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
            cand --progress 'Show a progress bar on stderr (default: only when stderr is a terminal)'
            cand --no-progress 'Never show a progress bar'
            cand --explain 'Print the plan and exit without moving data'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'zerocat;copy'= {
            cand -t 'Copy every source into DIR (cp -t, for xargs and find -exec ... +)'
            cand --target-directory 'Copy every source into DIR (cp -t, for xargs and find -exec ... +)'
            cand -u 'Which existing destinations are replaced (coreutils 9.5): all (the default without --update), none (keep every one, as -n), older (a bare --update: only one older than its source). A destination kept is skipped and counted. -u is --update=older'
            cand --update 'Which existing destinations are replaced (coreutils 9.5): all (the default without --update), none (keep every one, as -n), older (a bare --update: only one older than its source). A destination kept is skipped and counted. -u is --update=older'
            cand --reflink 'Clone with FICLONE: auto (clone where the filesystem can, else copy), always (clone or fail; only with --sparse=auto, as cp), never'
            cand --sparse 'Holes: auto (a sparse source''s holes stay holes), always (also zero blocks become holes), never (write every byte: no clone and no copy_file_range, which may keep holes)'
            cand -j 'Copy a tree with N threads, each taking whole directories. Directories are still created before their entries and get their mode and times after them; the report and -v list entries in the walk''s order. Default: twice the CPUs available (sched_getaffinity), at most 8; -j 1 copies on one thread; -j takes at most 256'
            cand --jobs 'Copy a tree with N threads, each taking whole directories. Directories are still created before their entries and get their mode and times after them; the report and -v list entries in the walk''s order. Default: twice the CPUs available (sched_getaffinity), at most 8; -j 1 copies on one thread; -j takes at most 256'
            cand --limit 'Hold the copy to RATE bytes per second (the global --limit; in copy, -L is cp''s --dereference, so the rate has the long form only)'
            cand --via 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload'
            cand --stats 'Format of the end-of-run report on stderr'
            cand --stats-fd 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)'
            cand --size 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own'
            cand -r 'Copy directories and what they hold; symlinks are copied as symlinks (-R too)'
            cand --recursive 'Copy directories and what they hold; symlinks are copied as symlinks (-R too)'
            cand -a 'cp -a: -r and --preserve (symlinks are copied as symlinks in any tree)'
            cand --archive 'cp -a: -r and --preserve (symlinks are copied as symlinks in any tree)'
            cand -n 'Never overwrite an existing destination (it is skipped and counted)'
            cand --no-clobber 'Never overwrite an existing destination (it is skipped and counted)'
            cand -f 'A destination that cannot be opened is removed and created anew'
            cand --force 'A destination that cannot be opened is removed and created anew'
            cand -p 'Also keep exact mode bits, ownership (where permitted: not root, the group alone, if you are a member of it) and timestamps'
            cand --preserve 'Also keep exact mode bits, ownership (where permitted: not root, the group alone, if you are a member of it) and timestamps'
            cand --resume 'Continue an interrupted copy: keep a destination that is a verified prefix of the source (every byte compared, 1 MiB at a time; the time it took is reported) and copy the rest; any other destination is copied again from the start'
            cand --special 'In a tree, recreate FIFOs and device nodes instead of refusing them (an operand given without -r is read into a file, as cp does)'
            cand --sync 'fdatasync each file before counting it done: the progress bar shows bytes on disk, not in the page cache'
            cand --verify 'After each file is copied (by any path, a reflink too), read it and its source back and compare them; a difference fails that file, naming the offset. With --sync the copy is read from the disk, not the page cache'
            cand --atomic 'Write each file to a temporary in its destination''s directory and rename it over the destination only when complete (and verified): an interrupted or failed copy leaves the old destination as it was. Not with --resume, which keeps a partial destination'
            cand --debug 'After each file, print on stdout what ran, in cp 9.x''s words: ''a'' -> ''b'', then "copy offload: yes|no|avoided|unsupported, reflink: yes|unsupported|no, sparse detection: no|SEEK_HOLE|zeros|SEEK_HOLE + zeros"; a destination kept (--update=none, -n) gets "skipped ''b''". A stdout that cannot take the lines fails the run (exit 1)'
            cand -T 'DEST is the copy itself, even when it is a directory (cp -T): one source'
            cand --no-target-directory 'DEST is the copy itself, even when it is a directory (cp -T): one source'
            cand --parents 'Keep each source''s path under the directory DEST (cp --parents: a/b/f -> DEST/a/b/f)'
            cand -i 'Ask on stderr before replacing an existing destination; a line from stdin that starts with y answers yes (cp -i). Copies one file at a time'
            cand --interactive 'Ask on stderr before replacing an existing destination; a line from stdin that starts with y answers yes (cp -i). Copies one file at a time'
            cand -L 'Follow every symlink, in trees too: a link is copied as what it points to (cp -L). A link to a directory that holds it is refused ("cyclic symbolic link")'
            cand --dereference 'Follow every symlink, in trees too: a link is copied as what it points to (cp -L). A link to a directory that holds it is refused ("cyclic symbolic link")'
            cand -H 'Follow the symlinks given as operands only; inside a tree they stay symlinks (cp -H)'
            cand --dereference-command-line 'Follow the symlinks given as operands only; inside a tree they stay symlinks (cp -H)'
            cand -P 'Never follow a symlink: an operand that is one is copied as a symlink (cp -P; the default under -r; without -r an operand is followed)'
            cand --no-dereference 'Never follow a symlink: an operand that is one is copied as a symlink (cp -P; the default under -r; without -r an operand is followed)'
            cand --remove-destination 'Remove an existing destination before copying, instead of opening it and writing over it (cp --remove-destination): a symlink there is replaced, not written through'
            cand -s 'cp -s: refused with a usage error that says so (copy makes copies; ln makes links)'
            cand --symbolic-link 'cp -s: refused with a usage error that says so (copy makes copies; ln makes links)'
            cand -l 'cp -l: refused likewise'
            cand --link 'cp -l: refused likewise'
            cand -q 'No report line, no progress'
            cand --quiet 'No report line, no progress'
            cand -v 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
            cand --verbose 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
            cand --progress 'Show a progress bar on stderr (default: only when stderr is a terminal)'
            cand --no-progress 'Never show a progress bar'
            cand --explain 'Print the plan and exit without moving data'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'zerocat;tee'= {
            cand --on-error 'When a sink fails: stop everything (exit 1, naming it; stdout''s reader going away is a quiet 141), or drop that sink and keep feeding the others (still exit 1 at the end). fail is the default; continue is --output-error=warn; gnu is GNU tee without --output-error (a failing file is dropped and the others go on, exit 1 at the end; a reader that went away ends the run quietly, 141)'
            cand -p 'GNU tee''s modes: warn (drop a failing sink, feed the others, exit 1), warn-nopipe (the same, but a reader that went away (EPIPE) is dropped quietly and is no error), exit (stop at the first failing sink, EPIPE included: exit 1), exit-nopipe (a reader that went away is dropped quietly; any other error stops). Bare --output-error and -p mean warn-nopipe'
            cand --output-error 'GNU tee''s modes: warn (drop a failing sink, feed the others, exit 1), warn-nopipe (the same, but a reader that went away (EPIPE) is dropped quietly and is no error), exit (stop at the first failing sink, EPIPE included: exit 1), exit-nopipe (a reader that went away is dropped quietly; any other error stops). Bare --output-error and -p mean warn-nopipe'
            cand --grace 'After SIGINT/SIGTERM, an exec:/sh: child gets SIGTERM, then SIGKILL after this long'
            cand --via 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload'
            cand --stats 'Format of the end-of-run report on stderr'
            cand -L 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay refuses it (usage error) rather than ignore it. After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)'
            cand --limit 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay refuses it (usage error) rather than ignore it. After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)'
            cand --stats-fd 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)'
            cand --size 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own'
            cand -a 'Append to the file sinks instead of truncating them (GNU tee -a; file:X,append)'
            cand --append 'Append to the file sinks instead of truncating them (GNU tee -a; file:X,append)'
            cand -i 'Ignore SIGINT (GNU tee -i): a Ctrl-C meant for the command feeding the pipe does not cut the copy short; SIGTERM still stops it'
            cand --ignore-interrupts 'Ignore SIGINT (GNU tee -i): a Ctrl-C meant for the command feeding the pipe does not cut the copy short; SIGTERM still stops it'
            cand -q 'No report line, no progress'
            cand --quiet 'No report line, no progress'
            cand -v 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
            cand --verbose 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
            cand --progress 'Show a progress bar on stderr (default: only when stderr is a terminal)'
            cand --no-progress 'Never show a progress bar'
            cand --explain 'Print the plan and exit without moving data'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'zerocat;relay'= {
            cand --max-conns 'Connections served at once; more wait in the listen backlog. Default: what the open-file limit holds, (limit - 16) / 7 (two sockets and a pipe each way, and one connection still greeting), after raising the soft limit to the hard one. A TLS or `proxy` listener also has at most this many (and 1,024) connections greeting, half of them from one address: past that the oldest greeting is closed for the newcomer. UDP: sessions open at once (a new client''s datagrams beyond it are dropped and counted)'
            cand --idle-timeout 'Close a connection that moved no byte either way for this long (500ms, 30s, 5m). UDP: a session ends after this long without a datagram (default 60s)'
            cand --connect-timeout 'Give up a connection attempt after this long (each attempt of retry=N); also how long a `proxy` or TLS listener waits for a PROXY header and handshake (default 5 s)'
            cand --grace 'After SIGINT/SIGTERM: stop accepting, let the connections in flight finish for this long, then cut (reset) the rest; a second signal cuts them at once. 0: cut at once. A command side''s child (exec:, sh:) of a cut connection then gets SIGTERM, and SIGKILL after this long again'
            cand --log 'Write one JSON line per connection as it ends, into PATH (appended; a FIFO works) or `-` (stderr); the fields are listed under RELAY LOG'
            cand -j 'Event loops serving a listener, each in a thread of its own; the listener is shared and a new connection goes to a loop that is waiting. Default: the CPUs available to the process. A TLS or `proxy` listener too: every loop takes handshakes. One session (no listener) or --once: one (the plan line says so). At most 256'
            cand --workers 'Event loops serving a listener, each in a thread of its own; the listener is shared and a new connection goes to a loop that is waiting. Default: the CPUs available to the process. A TLS or `proxy` listener too: every loop takes handshakes. One session (no listener) or --once: one (the plan line says so). At most 256'
            cand --via 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload'
            cand --stats 'Format of the end-of-run report on stderr'
            cand -L 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay refuses it (usage error) rather than ignore it. After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)'
            cand --limit 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay refuses it (usage error) rather than ignore it. After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)'
            cand --stats-fd 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)'
            cand --size 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own'
            cand --once 'Serve one connection, then exit'
            cand --splice-first 'Under auto, start every direction with splice, as if a bulk read had moved it there (the fault-injection and tiny-segment tests aim at splice)'
            cand -q 'No report line, no progress'
            cand --quiet 'No report line, no progress'
            cand -v 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
            cand --verbose 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
            cand --progress 'Show a progress bar on stderr (default: only when stderr is a terminal)'
            cand --no-progress 'Never show a progress bar'
            cand --explain 'Print the plan and exit without moving data'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'zerocat;probe'= {
            cand --wait 'Try again (every 250 ms) the targets not open yet until all are (exit 0) or this long has passed (exit 1): a container''s entrypoint waiting for its database'
            cand --connect-timeout 'Each try at a target (connect, and a tls: handshake) gives up after this long and says timeout (nc -w)'
            cand --via 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload'
            cand --stats 'Format of the end-of-run report on stderr'
            cand -L 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay refuses it (usage error) rather than ignore it. After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)'
            cand --limit 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay refuses it (usage error) rather than ignore it. After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)'
            cand --stats-fd 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)'
            cand --size 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own'
            cand -q 'No report line, no progress'
            cand --quiet 'No report line, no progress'
            cand -v 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
            cand --verbose 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
            cand --progress 'Show a progress bar on stderr (default: only when stderr is a terminal)'
            cand --no-progress 'Never show a progress bar'
            cand --explain 'Print the plan and exit without moving data'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'zerocat;completions'= {
            cand --via 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload'
            cand --stats 'Format of the end-of-run report on stderr'
            cand -L 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay refuses it (usage error) rather than ignore it. After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)'
            cand --limit 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay refuses it (usage error) rather than ignore it. After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)'
            cand --stats-fd 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)'
            cand --size 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own'
            cand -q 'No report line, no progress'
            cand --quiet 'No report line, no progress'
            cand -v 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
            cand --verbose 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
            cand --progress 'Show a progress bar on stderr (default: only when stderr is a terminal)'
            cand --no-progress 'Never show a progress bar'
            cand --explain 'Print the plan and exit without moving data'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'zerocat;man'= {
            cand --via 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload'
            cand --stats 'Format of the end-of-run report on stderr'
            cand -L 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay refuses it (usage error) rather than ignore it. After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)'
            cand --limit 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay refuses it (usage error) rather than ignore it. After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)'
            cand --stats-fd 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)'
            cand --size 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own'
            cand -q 'No report line, no progress'
            cand --quiet 'No report line, no progress'
            cand -v 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
            cand --verbose 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
            cand --progress 'Show a progress bar on stderr (default: only when stderr is a terminal)'
            cand --no-progress 'Never show a progress bar'
            cand --explain 'Print the plan and exit without moving data'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'zerocat;version'= {
            cand --via 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload'
            cand --stats 'Format of the end-of-run report on stderr'
            cand -L 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay refuses it (usage error) rather than ignore it. After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)'
            cand --limit 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay refuses it (usage error) rather than ignore it. After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)'
            cand --stats-fd 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)'
            cand --size 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own'
            cand -q 'No report line, no progress'
            cand --quiet 'No report line, no progress'
            cand -v 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
            cand --verbose 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
            cand --progress 'Show a progress bar on stderr (default: only when stderr is a terminal)'
            cand --no-progress 'Never show a progress bar'
            cand --explain 'Print the plan and exit without moving data'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'zerocat;help'= {
            cand pipe 'Move one stream from SRC to DST'
            cand copy 'Copy files and trees: reflink, then copy_file_range, splice, userspace'
            cand tee 'Send every byte of SRC to every DST (files, pipes, sockets, listeners)'
            cand relay 'Relay bytes both ways between A and B; a listener serves every connection'
            cand probe 'Is something answering? Connect to each TARGET and close at once (nc -z, wait-for-it)'
            cand completions 'Print a shell completion script'
            cand man 'Print the man page (roff)'
            cand version 'Print the version; with -v, also the commit, the kernel and what it offers (for a bug report)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'zerocat;help;pipe'= {
        }
        &'zerocat;help;copy'= {
        }
        &'zerocat;help;tee'= {
        }
        &'zerocat;help;relay'= {
        }
        &'zerocat;help;probe'= {
        }
        &'zerocat;help;completions'= {
        }
        &'zerocat;help;man'= {
        }
        &'zerocat;help;version'= {
        }
        &'zerocat;help;help'= {
        }
    ]
    $completions[$command]
}
