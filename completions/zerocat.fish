# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_zerocat_global_optspecs
    string join \n via= q/quiet v/verbose stats= progress no-progress explain L/limit= stats-fd= size= dump= dump-format= 4 6 h/help V/version
end

function __fish_zerocat_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_zerocat_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_zerocat_using_subcommand
    set -l cmd (__fish_zerocat_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c zerocat -n "__fish_zerocat_needs_command" -l via -d 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload' -r
complete -c zerocat -n "__fish_zerocat_needs_command" -l stats -d 'Format of the end-of-run report on stderr' -r -f -a "text\t''
json\t''"
complete -c zerocat -n "__fish_zerocat_needs_command" -s L -l limit -d 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv\'s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp\'s --dereference: write --limit there (or -L before the command)' -r
complete -c zerocat -n "__fish_zerocat_needs_command" -l stats-fd -d 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)' -r
complete -c zerocat -n "__fish_zerocat_needs_command" -l size -d 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own' -r
complete -c zerocat -n "__fish_zerocat_needs_command" -l dump -d 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed' -r -F
complete -c zerocat -n "__fish_zerocat_needs_command" -l dump-format -d 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \\n, \\r, \\t, \\\\, \\xHH) or pcap (a TCP conversation per connection, for Wireshark)' -r -f -a "hex\t''
text\t''
pcap\t''"
complete -c zerocat -n "__fish_zerocat_needs_command" -s q -l quiet -d 'No report line, no progress'
complete -c zerocat -n "__fish_zerocat_needs_command" -s v -l verbose -d 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
complete -c zerocat -n "__fish_zerocat_needs_command" -l progress -d 'Show a progress bar on stderr (default: only when stderr is a terminal)'
complete -c zerocat -n "__fish_zerocat_needs_command" -l no-progress -d 'Never show a progress bar'
complete -c zerocat -n "__fish_zerocat_needs_command" -l explain -d 'Print the plan and exit without moving data'
complete -c zerocat -n "__fish_zerocat_needs_command" -s 4 -d 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error'
complete -c zerocat -n "__fish_zerocat_needs_command" -s 6 -d 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)'
complete -c zerocat -n "__fish_zerocat_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c zerocat -n "__fish_zerocat_needs_command" -s V -l version -d 'Print version'
complete -c zerocat -n "__fish_zerocat_needs_command" -f -a "pipe" -d 'Move one stream from SRC to DST'
complete -c zerocat -n "__fish_zerocat_needs_command" -f -a "copy" -d 'Copy files and trees: reflink, then copy_file_range, splice, userspace'
complete -c zerocat -n "__fish_zerocat_needs_command" -f -a "tee" -d 'Send every byte of SRC to every DST (files, pipes, sockets, listeners)'
complete -c zerocat -n "__fish_zerocat_needs_command" -f -a "relay" -d 'Relay bytes both ways between A and B; a listener serves every connection'
complete -c zerocat -n "__fish_zerocat_needs_command" -f -a "probe" -d 'Is something answering? Connect to each TARGET and close at once (nc -z, wait-for-it)'
complete -c zerocat -n "__fish_zerocat_needs_command" -f -a "completions" -d 'Print a shell completion script'
complete -c zerocat -n "__fish_zerocat_needs_command" -f -a "man" -d 'Print the man page (roff)'
complete -c zerocat -n "__fish_zerocat_needs_command" -f -a "nc" -d 'Answer as netcat: OpenBSD nc\'s flags (also: a link named nc, netcat or ncat)'
complete -c zerocat -n "__fish_zerocat_needs_command" -f -a "pv" -d 'Answer as pv: pv\'s flags, pv\'s display (also: a link named pv)'
complete -c zerocat -n "__fish_zerocat_needs_command" -f -a "compat" -d 'Answer as nc, netcat, ncat, tee (GNU tee\'s grammar) or pv: `zerocat compat tee -a log`'
complete -c zerocat -n "__fish_zerocat_needs_command" -f -a "install-links" -d 'Make links named nc, netcat, ncat, tee and pv to this zerocat in DIR'
complete -c zerocat -n "__fish_zerocat_needs_command" -f -a "version" -d 'Print the version; with -v, also the commit, the kernel and what it offers (for a bug report)'
complete -c zerocat -n "__fish_zerocat_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c zerocat -n "__fish_zerocat_using_subcommand pipe" -l grace -d 'After SIGINT/SIGTERM, an exec:/sh: child gets SIGTERM, then SIGKILL after this long' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand pipe" -l idle-timeout -d 'End the run once no byte moved for this long (nc -w): a source that fell silent without closing (TCP, unix, TLS, a pipe, a terminal; UDP: no datagram), or a sink that took nothing. Bytes already taken are delivered first (then exit 0, the report ending in "idle timeout"); a sink that still takes nothing a second later fails the run. An http(s) source: no byte of its body for this long is a cut, resumed as --retries says (default 30s)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand pipe" -l connect-timeout -d 'Give up connecting a tcp:, unix: or tls: endpoint after this long (each attempt of retry=N; a tls: handshake too, else 10 s) (nc -w while connecting)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand pipe" -l retries -d 'An http(s) body that stops short (a reset, a close before its length, a chunked stream cut, --idle-timeout) is asked again from the next byte (Range, and If-Range its strong ETag or Last-Modified: another version is refused, never appended): at most N attempts in a row that get nowhere (a connection cut before it carried 1 MiB or lasted --retry-wait counts as one). 0: no resume' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand pipe" -l retry-wait -d 'The wait before the second attempt to resume (the first goes at once), doubled after each one that fails' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand pipe" -l via -d 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand pipe" -l stats -d 'Format of the end-of-run report on stderr' -r -f -a "text\t''
json\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand pipe" -s L -l limit -d 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv\'s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp\'s --dereference: write --limit there (or -L before the command)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand pipe" -l stats-fd -d 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand pipe" -l size -d 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand pipe" -l dump -d 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed' -r -F
complete -c zerocat -n "__fish_zerocat_using_subcommand pipe" -l dump-format -d 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \\n, \\r, \\t, \\\\, \\xHH) or pcap (a TCP conversation per connection, for Wireshark)' -r -f -a "hex\t''
text\t''
pcap\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand pipe" -s k -l keep-open -d 'SRC is a listener: take its connections one after another into DST, each whole before the next (others wait in the backlog), until SIGINT/SIGTERM (nc -lk, ncat -k). The report counts them'
complete -c zerocat -n "__fish_zerocat_using_subcommand pipe" -s q -l quiet -d 'No report line, no progress'
complete -c zerocat -n "__fish_zerocat_using_subcommand pipe" -s v -l verbose -d 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
complete -c zerocat -n "__fish_zerocat_using_subcommand pipe" -l progress -d 'Show a progress bar on stderr (default: only when stderr is a terminal)'
complete -c zerocat -n "__fish_zerocat_using_subcommand pipe" -l no-progress -d 'Never show a progress bar'
complete -c zerocat -n "__fish_zerocat_using_subcommand pipe" -l explain -d 'Print the plan and exit without moving data'
complete -c zerocat -n "__fish_zerocat_using_subcommand pipe" -s 4 -d 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error'
complete -c zerocat -n "__fish_zerocat_using_subcommand pipe" -s 6 -d 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)'
complete -c zerocat -n "__fish_zerocat_using_subcommand pipe" -s h -l help -d 'Print help'
complete -c zerocat -n "__fish_zerocat_using_subcommand pipe" -s V -l version -d 'Print version'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -s t -l target-directory -d 'Copy every source into DIR (cp -t, for xargs and find -exec ... +)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -s u -l update -d 'Which existing destinations are replaced (coreutils 9.5): all (the default without --update), none (keep every one, as -n), older (a bare --update: only one older than its source). A destination kept is skipped and counted. -u is --update=older' -r -f -a "all\t''
none\t''
older\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -l reflink -d 'Clone with FICLONE: auto (clone where the filesystem can, else copy), always (clone or fail; only with --sparse=auto, as cp), never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -l sparse -d 'Holes: auto (a sparse source\'s holes stay holes), always (also zero blocks become holes), never (write every byte: no clone and no copy_file_range, which may keep holes)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -s j -l jobs -d 'Copy a tree with N threads, each taking whole directories. Directories are still created before their entries and get their mode and times after them; the report and -v list entries in the walk\'s order. Default: twice the CPUs available (sched_getaffinity), at most 8; -j 1 copies on one thread; -j takes at most 256. To or from s3://: N objects at once in copy -r (default 8); one object up, N parts of its multipart upload at once (its parts=, default 4; at most 64)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -l limit -d 'Hold the copy to RATE bytes per second (the global --limit; in copy, -L is cp\'s --dereference, so the rate has the long form only)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -l idle-timeout -d 'An http(s) source: no byte of the body for this long is a cut, resumed as --retries says (default 30s)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -l retries -d 'An http(s) body that stops short (a reset, a close before its length, a chunked stream cut, --idle-timeout) is asked again from the next byte (Range, and If-Range its strong ETag or Last-Modified: another version is refused, never appended): at most N attempts in a row that get nowhere (a connection cut before it carried 1 MiB or lasted --retry-wait counts as one). 0: no resume' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -l retry-wait -d 'The wait before the second attempt to resume (the first goes at once), doubled after each one that fails' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -l via -d 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -l stats -d 'Format of the end-of-run report on stderr' -r -f -a "text\t''
json\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -l stats-fd -d 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -l size -d 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -l dump -d 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed' -r -F
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -l dump-format -d 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \\n, \\r, \\t, \\\\, \\xHH) or pcap (a TCP conversation per connection, for Wireshark)' -r -f -a "hex\t''
text\t''
pcap\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -s r -l recursive -d 'Copy directories and what they hold; symlinks are copied as symlinks (-R too)'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -s a -l archive -d 'cp -a: -r and --preserve (symlinks are copied as symlinks in any tree)'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -s n -l no-clobber -d 'Never overwrite an existing destination (it is skipped and counted)'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -s f -l force -d 'A destination that cannot be opened is removed and created anew'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -s p -l preserve -d 'Also keep exact mode bits, ownership (where permitted: not root, the group alone, if you are a member of it) and timestamps'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -l resume -d 'Continue an interrupted copy: keep a destination that is a verified prefix of the source (every byte compared, 1 MiB at a time; the time it took is reported) and copy the rest; any other destination is copied again from the start'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -l special -d 'In a tree, recreate FIFOs and device nodes instead of refusing them (an operand given without -r is read into a file, as cp does)'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -l sync -d 'fdatasync each file before counting it done: the progress bar shows bytes on disk, not in the page cache'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -l verify -d 'After each file is copied (by any path, a reflink too), read it and its source back and compare them; a difference fails that file, naming the offset. With --sync the copy is read from the disk, not the page cache'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -l atomic -d 'Write each file to a temporary in its destination\'s directory and rename it over the destination only when complete (and verified): an interrupted or failed copy leaves the old destination as it was. Not with --resume, which keeps a partial destination'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -l debug -d 'After each file, print on stdout what ran, in cp 9.x\'s words: \'a\' -> \'b\', then "copy offload: yes|no|avoided|unsupported, reflink: yes|unsupported|no, sparse detection: no|SEEK_HOLE|zeros|SEEK_HOLE + zeros"; a destination kept (--update=none, -n) gets "skipped \'b\'". A stdout that cannot take the lines fails the run (exit 1)'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -s T -l no-target-directory -d 'DEST is the copy itself, even when it is a directory (cp -T): one source'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -l parents -d 'Keep each source\'s path under the directory DEST (cp --parents: a/b/f -> DEST/a/b/f)'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -s i -l interactive -d 'Ask on stderr before replacing an existing destination; a line from stdin that starts with y answers yes (cp -i). Copies one file at a time'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -s L -l dereference -d 'Follow every symlink, in trees too: a link is copied as what it points to (cp -L). A link to a directory that holds it is refused ("cyclic symbolic link")'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -s H -l dereference-command-line -d 'Follow the symlinks given as operands only; inside a tree they stay symlinks (cp -H)'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -s P -l no-dereference -d 'Never follow a symlink: an operand that is one is copied as a symlink (cp -P; the default under -r; without -r an operand is followed)'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -l remove-destination -d 'Remove an existing destination before copying, instead of opening it and writing over it (cp --remove-destination): a symlink there is replaced, not written through'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -s s -l symbolic-link -d 'cp -s: refused with a usage error that says so (copy makes copies; ln makes links)'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -s l -l link -d 'cp -l: refused likewise'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -s q -l quiet -d 'No report line, no progress'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -s v -l verbose -d 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -l progress -d 'Show a progress bar on stderr (default: only when stderr is a terminal)'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -l no-progress -d 'Never show a progress bar'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -l explain -d 'Print the plan and exit without moving data'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -s 4 -d 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -s 6 -d 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -s h -l help -d 'Print help'
complete -c zerocat -n "__fish_zerocat_using_subcommand copy" -s V -l version -d 'Print version'
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -l on-error -d 'When a sink fails: stop everything (exit 1, naming it; stdout\'s reader going away is a quiet 141), or drop that sink and keep feeding the others (still exit 1 at the end). fail is the default; continue is --output-error=warn; gnu is GNU tee without --output-error (a failing file is dropped and the others go on, exit 1 at the end; a reader that went away ends the run quietly, 141)' -r -f -a "fail\t''
continue\t''
gnu\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -s p -l output-error -d 'GNU tee\'s modes: warn (drop a failing sink, feed the others, exit 1), warn-nopipe (the same, but a reader that went away (EPIPE) is dropped quietly and is no error), exit (stop at the first failing sink, EPIPE included: exit 1), exit-nopipe (a reader that went away is dropped quietly; any other error stops). Bare --output-error and -p mean warn-nopipe' -r -f -a "warn\t''
warn-nopipe\t''
exit\t''
exit-nopipe\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -l grace -d 'After SIGINT/SIGTERM, an exec:/sh: child gets SIGTERM, then SIGKILL after this long' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -l idle-timeout -d 'End the run once no byte moved for this long, as pipe\'s --idle-timeout' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -l connect-timeout -d 'Give up connecting a tcp:, unix: or tls: endpoint after this long, as pipe\'s' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -l retries -d 'An http(s) body that stops short (a reset, a close before its length, a chunked stream cut, --idle-timeout) is asked again from the next byte (Range, and If-Range its strong ETag or Last-Modified: another version is refused, never appended): at most N attempts in a row that get nowhere (a connection cut before it carried 1 MiB or lasted --retry-wait counts as one). 0: no resume' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -l retry-wait -d 'The wait before the second attempt to resume (the first goes at once), doubled after each one that fails' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -l via -d 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -l stats -d 'Format of the end-of-run report on stderr' -r -f -a "text\t''
json\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -s L -l limit -d 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv\'s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp\'s --dereference: write --limit there (or -L before the command)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -l stats-fd -d 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -l size -d 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -l dump -d 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed' -r -F
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -l dump-format -d 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \\n, \\r, \\t, \\\\, \\xHH) or pcap (a TCP conversation per connection, for Wireshark)' -r -f -a "hex\t''
text\t''
pcap\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -s a -l append -d 'Append to the file sinks instead of truncating them (GNU tee -a; file:X,append)'
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -s i -l ignore-interrupts -d 'Ignore SIGINT (GNU tee -i): a Ctrl-C meant for the command feeding the pipe does not cut the copy short; SIGTERM still stops it'
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -l keep-open -d 'SRC is a listener: take its connections one after another, each whole into every DST before the next (others wait in the backlog), until SIGINT/SIGTERM, as pipe\'s'
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -s q -l quiet -d 'No report line, no progress'
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -s v -l verbose -d 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -l progress -d 'Show a progress bar on stderr (default: only when stderr is a terminal)'
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -l no-progress -d 'Never show a progress bar'
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -l explain -d 'Print the plan and exit without moving data'
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -s 4 -d 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error'
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -s 6 -d 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)'
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -s h -l help -d 'Print help'
complete -c zerocat -n "__fish_zerocat_using_subcommand tee" -s V -l version -d 'Print version'
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -l balance -d 'With several upstreams, which one a connection gets: failover (the first that is up), round-robin, least-conn (fewest open), source-hash (by the client\'s IP address)' -r -f -a "failover\t'The first in the order given (realm\'s and HAProxy\'s backup servers)'
round-robin\t'Each in turn'
least-conn\t'The one with the fewest connections open (ties: in turn)'
source-hash\t'By a hash of the client\'s IP address: a client keeps its upstream while it is up'"
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -l down-for -d 'With several upstreams, skip one that failed a connection (refused, timed out, reset or TLS failed before any byte moved) for this long. 0: never skip' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -l check-interval -d 'With several upstreams, probe each this often (a TCP or unix connect; a TLS handshake for tls:): one that fails is down for --down-for, one that answers is up' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -l limit-total -d 'Hold all connections together to RATE bytes per second each way (-L/--limit holds each direction of each connection)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -l exit-idle -d 'With an inherited listener (systemd:, fd:N): exit 0 after this long with no connection open, leaving the listening socket to systemd (a client arriving then waits in its backlog for the next activation)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -l max-conns -d 'Connections served at once; more wait in the listen backlog. Default: what the open-file limit holds, (limit - 16) / 7 (two sockets and a pipe each way, and one connection still greeting), after raising the soft limit to the hard one. A TLS or `proxy` listener also has at most this many (and 1,024) connections greeting, half of them from one address: past that the oldest greeting is closed for the newcomer. UDP: sessions open at once (a new client\'s datagrams beyond it are dropped and counted)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -l idle-timeout -d 'Close a connection that moved no byte either way for this long (500ms, 30s, 5m). UDP: a session ends after this long without a datagram (default 60s)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -l connect-timeout -d 'Give up a connection attempt after this long (each attempt of retry=N); also how long a `proxy` or TLS listener waits for a PROXY header and handshake (default 5 s)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -l linger -d 'Once one direction of a connection has ended (EOF, passed on as a half-close), give the other at most this long, then end the connection cleanly (nc -q, ncat -q; 0: at once). Without it, the other direction goes on until its own EOF' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -l grace -d 'After SIGINT/SIGTERM: stop accepting, let the connections in flight finish for this long, then cut (reset) the rest; a second signal cuts them at once. 0: cut at once. A command side\'s child (exec:, sh:) of a cut connection then gets SIGTERM, and SIGKILL after this long again' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -l log -d 'Write one JSON line per connection as it ends, into PATH (appended; a FIFO works) or `-` (stderr); the fields are listed under RELAY LOG' -r -F
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -s j -l workers -d 'Event loops serving a listener, each in a thread of its own; the listener is shared and a new connection goes to a loop that is waiting. Default: the CPUs available to the process, one below 4 CPUs. A TLS or `proxy` listener too: every loop takes handshakes. One session (no listener) or --once: one (the plan line says so). At most 256' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -l via -d 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -l stats -d 'Format of the end-of-run report on stderr' -r -f -a "text\t''
json\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -s L -l limit -d 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv\'s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp\'s --dereference: write --limit there (or -L before the command)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -l stats-fd -d 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -l size -d 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -l dump -d 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed' -r -F
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -l dump-format -d 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \\n, \\r, \\t, \\\\, \\xHH) or pcap (a TCP conversation per connection, for Wireshark)' -r -f -a "hex\t''
text\t''
pcap\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -l once -d 'Serve one connection, then exit'
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -l splice-first -d 'Under auto, start every direction with splice, as if a bulk read had moved it there (the fault-injection and tiny-segment tests aim at splice)'
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -s q -l quiet -d 'No report line, no progress'
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -s v -l verbose -d 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -l progress -d 'Show a progress bar on stderr (default: only when stderr is a terminal)'
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -l no-progress -d 'Never show a progress bar'
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -l explain -d 'Print the plan and exit without moving data'
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -s 4 -d 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error'
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -s 6 -d 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)'
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c zerocat -n "__fish_zerocat_using_subcommand relay" -s V -l version -d 'Print version'
complete -c zerocat -n "__fish_zerocat_using_subcommand probe" -l wait -d 'Try again (every 250 ms) the targets not open yet until all are (exit 0) or this long has passed (exit 1): a container\'s entrypoint waiting for its database' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand probe" -l connect-timeout -d 'Each try at a target (connect, and a tls: handshake) gives up after this long and says timeout (nc -w)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand probe" -l via -d 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand probe" -l stats -d 'Format of the end-of-run report on stderr' -r -f -a "text\t''
json\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand probe" -s L -l limit -d 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv\'s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp\'s --dereference: write --limit there (or -L before the command)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand probe" -l stats-fd -d 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand probe" -l size -d 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand probe" -l dump -d 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed' -r -F
complete -c zerocat -n "__fish_zerocat_using_subcommand probe" -l dump-format -d 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \\n, \\r, \\t, \\\\, \\xHH) or pcap (a TCP conversation per connection, for Wireshark)' -r -f -a "hex\t''
text\t''
pcap\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand probe" -s q -l quiet -d 'No report line, no progress'
complete -c zerocat -n "__fish_zerocat_using_subcommand probe" -s v -l verbose -d 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
complete -c zerocat -n "__fish_zerocat_using_subcommand probe" -l progress -d 'Show a progress bar on stderr (default: only when stderr is a terminal)'
complete -c zerocat -n "__fish_zerocat_using_subcommand probe" -l no-progress -d 'Never show a progress bar'
complete -c zerocat -n "__fish_zerocat_using_subcommand probe" -l explain -d 'Print the plan and exit without moving data'
complete -c zerocat -n "__fish_zerocat_using_subcommand probe" -s 4 -d 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error'
complete -c zerocat -n "__fish_zerocat_using_subcommand probe" -s 6 -d 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)'
complete -c zerocat -n "__fish_zerocat_using_subcommand probe" -s h -l help -d 'Print help'
complete -c zerocat -n "__fish_zerocat_using_subcommand probe" -s V -l version -d 'Print version'
complete -c zerocat -n "__fish_zerocat_using_subcommand completions" -l via -d 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand completions" -l stats -d 'Format of the end-of-run report on stderr' -r -f -a "text\t''
json\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand completions" -s L -l limit -d 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv\'s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp\'s --dereference: write --limit there (or -L before the command)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand completions" -l stats-fd -d 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand completions" -l size -d 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand completions" -l dump -d 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed' -r -F
complete -c zerocat -n "__fish_zerocat_using_subcommand completions" -l dump-format -d 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \\n, \\r, \\t, \\\\, \\xHH) or pcap (a TCP conversation per connection, for Wireshark)' -r -f -a "hex\t''
text\t''
pcap\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand completions" -s q -l quiet -d 'No report line, no progress'
complete -c zerocat -n "__fish_zerocat_using_subcommand completions" -s v -l verbose -d 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
complete -c zerocat -n "__fish_zerocat_using_subcommand completions" -l progress -d 'Show a progress bar on stderr (default: only when stderr is a terminal)'
complete -c zerocat -n "__fish_zerocat_using_subcommand completions" -l no-progress -d 'Never show a progress bar'
complete -c zerocat -n "__fish_zerocat_using_subcommand completions" -l explain -d 'Print the plan and exit without moving data'
complete -c zerocat -n "__fish_zerocat_using_subcommand completions" -s 4 -d 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error'
complete -c zerocat -n "__fish_zerocat_using_subcommand completions" -s 6 -d 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)'
complete -c zerocat -n "__fish_zerocat_using_subcommand completions" -s h -l help -d 'Print help'
complete -c zerocat -n "__fish_zerocat_using_subcommand completions" -s V -l version -d 'Print version'
complete -c zerocat -n "__fish_zerocat_using_subcommand man" -l via -d 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand man" -l stats -d 'Format of the end-of-run report on stderr' -r -f -a "text\t''
json\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand man" -s L -l limit -d 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv\'s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp\'s --dereference: write --limit there (or -L before the command)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand man" -l stats-fd -d 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand man" -l size -d 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand man" -l dump -d 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed' -r -F
complete -c zerocat -n "__fish_zerocat_using_subcommand man" -l dump-format -d 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \\n, \\r, \\t, \\\\, \\xHH) or pcap (a TCP conversation per connection, for Wireshark)' -r -f -a "hex\t''
text\t''
pcap\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand man" -s q -l quiet -d 'No report line, no progress'
complete -c zerocat -n "__fish_zerocat_using_subcommand man" -s v -l verbose -d 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
complete -c zerocat -n "__fish_zerocat_using_subcommand man" -l progress -d 'Show a progress bar on stderr (default: only when stderr is a terminal)'
complete -c zerocat -n "__fish_zerocat_using_subcommand man" -l no-progress -d 'Never show a progress bar'
complete -c zerocat -n "__fish_zerocat_using_subcommand man" -l explain -d 'Print the plan and exit without moving data'
complete -c zerocat -n "__fish_zerocat_using_subcommand man" -s 4 -d 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error'
complete -c zerocat -n "__fish_zerocat_using_subcommand man" -s 6 -d 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)'
complete -c zerocat -n "__fish_zerocat_using_subcommand man" -s h -l help -d 'Print help'
complete -c zerocat -n "__fish_zerocat_using_subcommand man" -s V -l version -d 'Print version'
complete -c zerocat -n "__fish_zerocat_using_subcommand nc" -l via -d 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand nc" -l stats -d 'Format of the end-of-run report on stderr' -r -f -a "text\t''
json\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand nc" -s L -l limit -d 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv\'s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp\'s --dereference: write --limit there (or -L before the command)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand nc" -l stats-fd -d 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand nc" -l size -d 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand nc" -l dump -d 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed' -r -F
complete -c zerocat -n "__fish_zerocat_using_subcommand nc" -l dump-format -d 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \\n, \\r, \\t, \\\\, \\xHH) or pcap (a TCP conversation per connection, for Wireshark)' -r -f -a "hex\t''
text\t''
pcap\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand nc" -s q -l quiet -d 'No report line, no progress'
complete -c zerocat -n "__fish_zerocat_using_subcommand nc" -s v -l verbose -d 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
complete -c zerocat -n "__fish_zerocat_using_subcommand nc" -l progress -d 'Show a progress bar on stderr (default: only when stderr is a terminal)'
complete -c zerocat -n "__fish_zerocat_using_subcommand nc" -l no-progress -d 'Never show a progress bar'
complete -c zerocat -n "__fish_zerocat_using_subcommand nc" -l explain -d 'Print the plan and exit without moving data'
complete -c zerocat -n "__fish_zerocat_using_subcommand nc" -s 4 -d 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error'
complete -c zerocat -n "__fish_zerocat_using_subcommand nc" -s 6 -d 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)'
complete -c zerocat -n "__fish_zerocat_using_subcommand nc" -s V -l version -d 'Print version'
complete -c zerocat -n "__fish_zerocat_using_subcommand pv" -l via -d 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand pv" -l stats -d 'Format of the end-of-run report on stderr' -r -f -a "text\t''
json\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand pv" -s L -l limit -d 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv\'s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp\'s --dereference: write --limit there (or -L before the command)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand pv" -l stats-fd -d 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand pv" -l size -d 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand pv" -l dump -d 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed' -r -F
complete -c zerocat -n "__fish_zerocat_using_subcommand pv" -l dump-format -d 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \\n, \\r, \\t, \\\\, \\xHH) or pcap (a TCP conversation per connection, for Wireshark)' -r -f -a "hex\t''
text\t''
pcap\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand pv" -s q -l quiet -d 'No report line, no progress'
complete -c zerocat -n "__fish_zerocat_using_subcommand pv" -s v -l verbose -d 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
complete -c zerocat -n "__fish_zerocat_using_subcommand pv" -l progress -d 'Show a progress bar on stderr (default: only when stderr is a terminal)'
complete -c zerocat -n "__fish_zerocat_using_subcommand pv" -l no-progress -d 'Never show a progress bar'
complete -c zerocat -n "__fish_zerocat_using_subcommand pv" -l explain -d 'Print the plan and exit without moving data'
complete -c zerocat -n "__fish_zerocat_using_subcommand pv" -s 4 -d 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error'
complete -c zerocat -n "__fish_zerocat_using_subcommand pv" -s 6 -d 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)'
complete -c zerocat -n "__fish_zerocat_using_subcommand pv" -s V -l version -d 'Print version'
complete -c zerocat -n "__fish_zerocat_using_subcommand compat" -l via -d 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand compat" -l stats -d 'Format of the end-of-run report on stderr' -r -f -a "text\t''
json\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand compat" -s L -l limit -d 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv\'s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp\'s --dereference: write --limit there (or -L before the command)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand compat" -l stats-fd -d 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand compat" -l size -d 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand compat" -l dump -d 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed' -r -F
complete -c zerocat -n "__fish_zerocat_using_subcommand compat" -l dump-format -d 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \\n, \\r, \\t, \\\\, \\xHH) or pcap (a TCP conversation per connection, for Wireshark)' -r -f -a "hex\t''
text\t''
pcap\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand compat" -s q -l quiet -d 'No report line, no progress'
complete -c zerocat -n "__fish_zerocat_using_subcommand compat" -s v -l verbose -d 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
complete -c zerocat -n "__fish_zerocat_using_subcommand compat" -l progress -d 'Show a progress bar on stderr (default: only when stderr is a terminal)'
complete -c zerocat -n "__fish_zerocat_using_subcommand compat" -l no-progress -d 'Never show a progress bar'
complete -c zerocat -n "__fish_zerocat_using_subcommand compat" -l explain -d 'Print the plan and exit without moving data'
complete -c zerocat -n "__fish_zerocat_using_subcommand compat" -s 4 -d 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error'
complete -c zerocat -n "__fish_zerocat_using_subcommand compat" -s 6 -d 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)'
complete -c zerocat -n "__fish_zerocat_using_subcommand compat" -s V -l version -d 'Print version'
complete -c zerocat -n "__fish_zerocat_using_subcommand install-links" -l via -d 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand install-links" -l stats -d 'Format of the end-of-run report on stderr' -r -f -a "text\t''
json\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand install-links" -s L -l limit -d 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv\'s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp\'s --dereference: write --limit there (or -L before the command)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand install-links" -l stats-fd -d 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand install-links" -l size -d 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand install-links" -l dump -d 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed' -r -F
complete -c zerocat -n "__fish_zerocat_using_subcommand install-links" -l dump-format -d 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \\n, \\r, \\t, \\\\, \\xHH) or pcap (a TCP conversation per connection, for Wireshark)' -r -f -a "hex\t''
text\t''
pcap\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand install-links" -l force -d 'Replace what already has one of those names there'
complete -c zerocat -n "__fish_zerocat_using_subcommand install-links" -s q -l quiet -d 'No report line, no progress'
complete -c zerocat -n "__fish_zerocat_using_subcommand install-links" -s v -l verbose -d 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
complete -c zerocat -n "__fish_zerocat_using_subcommand install-links" -l progress -d 'Show a progress bar on stderr (default: only when stderr is a terminal)'
complete -c zerocat -n "__fish_zerocat_using_subcommand install-links" -l no-progress -d 'Never show a progress bar'
complete -c zerocat -n "__fish_zerocat_using_subcommand install-links" -l explain -d 'Print the plan and exit without moving data'
complete -c zerocat -n "__fish_zerocat_using_subcommand install-links" -s 4 -d 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error'
complete -c zerocat -n "__fish_zerocat_using_subcommand install-links" -s 6 -d 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)'
complete -c zerocat -n "__fish_zerocat_using_subcommand install-links" -s h -l help -d 'Print help'
complete -c zerocat -n "__fish_zerocat_using_subcommand install-links" -s V -l version -d 'Print version'
complete -c zerocat -n "__fish_zerocat_using_subcommand version" -l via -d 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand version" -l stats -d 'Format of the end-of-run report on stderr' -r -f -a "text\t''
json\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand version" -s L -l limit -d 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv\'s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp\'s --dereference: write --limit there (or -L before the command)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand version" -l stats-fd -d 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand version" -l size -d 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own' -r
complete -c zerocat -n "__fish_zerocat_using_subcommand version" -l dump -d 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed' -r -F
complete -c zerocat -n "__fish_zerocat_using_subcommand version" -l dump-format -d 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \\n, \\r, \\t, \\\\, \\xHH) or pcap (a TCP conversation per connection, for Wireshark)' -r -f -a "hex\t''
text\t''
pcap\t''"
complete -c zerocat -n "__fish_zerocat_using_subcommand version" -s q -l quiet -d 'No report line, no progress'
complete -c zerocat -n "__fish_zerocat_using_subcommand version" -s v -l verbose -d 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data'
complete -c zerocat -n "__fish_zerocat_using_subcommand version" -l progress -d 'Show a progress bar on stderr (default: only when stderr is a terminal)'
complete -c zerocat -n "__fish_zerocat_using_subcommand version" -l no-progress -d 'Never show a progress bar'
complete -c zerocat -n "__fish_zerocat_using_subcommand version" -l explain -d 'Print the plan and exit without moving data'
complete -c zerocat -n "__fish_zerocat_using_subcommand version" -s 4 -d 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error'
complete -c zerocat -n "__fish_zerocat_using_subcommand version" -s 6 -d 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)'
complete -c zerocat -n "__fish_zerocat_using_subcommand version" -s h -l help -d 'Print help'
complete -c zerocat -n "__fish_zerocat_using_subcommand version" -s V -l version -d 'Print version'
complete -c zerocat -n "__fish_zerocat_using_subcommand help; and not __fish_seen_subcommand_from pipe copy tee relay probe completions man nc pv compat install-links version help" -f -a "pipe" -d 'Move one stream from SRC to DST'
complete -c zerocat -n "__fish_zerocat_using_subcommand help; and not __fish_seen_subcommand_from pipe copy tee relay probe completions man nc pv compat install-links version help" -f -a "copy" -d 'Copy files and trees: reflink, then copy_file_range, splice, userspace'
complete -c zerocat -n "__fish_zerocat_using_subcommand help; and not __fish_seen_subcommand_from pipe copy tee relay probe completions man nc pv compat install-links version help" -f -a "tee" -d 'Send every byte of SRC to every DST (files, pipes, sockets, listeners)'
complete -c zerocat -n "__fish_zerocat_using_subcommand help; and not __fish_seen_subcommand_from pipe copy tee relay probe completions man nc pv compat install-links version help" -f -a "relay" -d 'Relay bytes both ways between A and B; a listener serves every connection'
complete -c zerocat -n "__fish_zerocat_using_subcommand help; and not __fish_seen_subcommand_from pipe copy tee relay probe completions man nc pv compat install-links version help" -f -a "probe" -d 'Is something answering? Connect to each TARGET and close at once (nc -z, wait-for-it)'
complete -c zerocat -n "__fish_zerocat_using_subcommand help; and not __fish_seen_subcommand_from pipe copy tee relay probe completions man nc pv compat install-links version help" -f -a "completions" -d 'Print a shell completion script'
complete -c zerocat -n "__fish_zerocat_using_subcommand help; and not __fish_seen_subcommand_from pipe copy tee relay probe completions man nc pv compat install-links version help" -f -a "man" -d 'Print the man page (roff)'
complete -c zerocat -n "__fish_zerocat_using_subcommand help; and not __fish_seen_subcommand_from pipe copy tee relay probe completions man nc pv compat install-links version help" -f -a "nc" -d 'Answer as netcat: OpenBSD nc\'s flags (also: a link named nc, netcat or ncat)'
complete -c zerocat -n "__fish_zerocat_using_subcommand help; and not __fish_seen_subcommand_from pipe copy tee relay probe completions man nc pv compat install-links version help" -f -a "pv" -d 'Answer as pv: pv\'s flags, pv\'s display (also: a link named pv)'
complete -c zerocat -n "__fish_zerocat_using_subcommand help; and not __fish_seen_subcommand_from pipe copy tee relay probe completions man nc pv compat install-links version help" -f -a "compat" -d 'Answer as nc, netcat, ncat, tee (GNU tee\'s grammar) or pv: `zerocat compat tee -a log`'
complete -c zerocat -n "__fish_zerocat_using_subcommand help; and not __fish_seen_subcommand_from pipe copy tee relay probe completions man nc pv compat install-links version help" -f -a "install-links" -d 'Make links named nc, netcat, ncat, tee and pv to this zerocat in DIR'
complete -c zerocat -n "__fish_zerocat_using_subcommand help; and not __fish_seen_subcommand_from pipe copy tee relay probe completions man nc pv compat install-links version help" -f -a "version" -d 'Print the version; with -v, also the commit, the kernel and what it offers (for a bug report)'
complete -c zerocat -n "__fish_zerocat_using_subcommand help; and not __fish_seen_subcommand_from pipe copy tee relay probe completions man nc pv compat install-links version help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
