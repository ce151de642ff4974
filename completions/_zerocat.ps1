
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'zerocat' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'zerocat'
        for ($i = 1; $i -lt $commandElements.Count; $i++) {
            $element = $commandElements[$i]
            if ($element -isnot [StringConstantExpressionAst] -or
                $element.StringConstantType -ne [StringConstantType]::BareWord -or
                $element.Value.StartsWith('-') -or
                $element.Value -eq $wordToComplete) {
                break
        }
        $element.Value
    }) -join ';'

    $completions = @(switch ($command) {
        'zerocat' {
            [CompletionResult]::new('--via', '--via', [CompletionResultType]::ParameterName, 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload')
            [CompletionResult]::new('--stats', '--stats', [CompletionResultType]::ParameterName, 'Format of the end-of-run report on stderr')
            [CompletionResult]::new('-L', '-L ', [CompletionResultType]::ParameterName, 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)')
            [CompletionResult]::new('--stats-fd', '--stats-fd', [CompletionResultType]::ParameterName, 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)')
            [CompletionResult]::new('--size', '--size', [CompletionResultType]::ParameterName, 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own')
            [CompletionResult]::new('--dump', '--dump', [CompletionResultType]::ParameterName, 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed')
            [CompletionResult]::new('--dump-format', '--dump-format', [CompletionResultType]::ParameterName, 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \n, \r, \t, \\, \xHH) or pcap (a TCP conversation per connection, for Wireshark)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--progress', '--progress', [CompletionResultType]::ParameterName, 'Show a progress bar on stderr (default: only when stderr is a terminal)')
            [CompletionResult]::new('--no-progress', '--no-progress', [CompletionResultType]::ParameterName, 'Never show a progress bar')
            [CompletionResult]::new('--explain', '--explain', [CompletionResultType]::ParameterName, 'Print the plan and exit without moving data')
            [CompletionResult]::new('-4', '-4', [CompletionResultType]::ParameterName, 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error')
            [CompletionResult]::new('-6', '-6', [CompletionResultType]::ParameterName, 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('pipe', 'pipe', [CompletionResultType]::ParameterValue, 'Move one stream from SRC to DST')
            [CompletionResult]::new('copy', 'copy', [CompletionResultType]::ParameterValue, 'Copy files and trees: reflink, then copy_file_range, splice, userspace')
            [CompletionResult]::new('tee', 'tee', [CompletionResultType]::ParameterValue, 'Send every byte of SRC to every DST (files, pipes, sockets, listeners)')
            [CompletionResult]::new('relay', 'relay', [CompletionResultType]::ParameterValue, 'Relay bytes both ways between A and B; a listener serves every connection')
            [CompletionResult]::new('probe', 'probe', [CompletionResultType]::ParameterValue, 'Is something answering? Connect to each TARGET and close at once (nc -z, wait-for-it)')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Print a shell completion script')
            [CompletionResult]::new('man', 'man', [CompletionResultType]::ParameterValue, 'Print the man page (roff)')
            [CompletionResult]::new('nc', 'nc', [CompletionResultType]::ParameterValue, 'Answer as netcat: OpenBSD nc''s flags (also: a link named nc, netcat or ncat)')
            [CompletionResult]::new('pv', 'pv', [CompletionResultType]::ParameterValue, 'Answer as pv: pv''s flags, pv''s display (also: a link named pv)')
            [CompletionResult]::new('compat', 'compat', [CompletionResultType]::ParameterValue, 'Answer as nc, netcat, ncat, tee (GNU tee''s grammar) or pv: `zerocat compat tee -a log`')
            [CompletionResult]::new('install-links', 'install-links', [CompletionResultType]::ParameterValue, 'Make links named nc, netcat, ncat, tee and pv to this zerocat in DIR')
            [CompletionResult]::new('version', 'version', [CompletionResultType]::ParameterValue, 'Print the version; with -v, also the commit, the kernel and what it offers (for a bug report)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'zerocat;pipe' {
            [CompletionResult]::new('--grace', '--grace', [CompletionResultType]::ParameterName, 'After SIGINT/SIGTERM, an exec:/sh: child gets SIGTERM, then SIGKILL after this long')
            [CompletionResult]::new('--idle-timeout', '--idle-timeout', [CompletionResultType]::ParameterName, 'End the run once no byte moved for this long (nc -w): a source that fell silent without closing (TCP, unix, TLS, a pipe, a terminal; UDP: no datagram), or a sink that took nothing. Bytes already taken are delivered first (then exit 0, the report ending in "idle timeout"); a sink that still takes nothing a second later fails the run. An http(s) source: no byte of its body for this long is a cut, resumed as --retries says (default 30s)')
            [CompletionResult]::new('--connect-timeout', '--connect-timeout', [CompletionResultType]::ParameterName, 'Give up connecting a tcp:, unix: or tls: endpoint after this long (each attempt of retry=N; a tls: handshake too, else 10 s) (nc -w while connecting)')
            [CompletionResult]::new('--retries', '--retries', [CompletionResultType]::ParameterName, 'An http(s) body that stops short (a reset, a close before its length, a chunked stream cut, --idle-timeout) is asked again from the next byte (Range, and If-Range its strong ETag or Last-Modified: another version is refused, never appended): at most N attempts in a row that get nowhere (a connection cut before it carried 1 MiB or lasted --retry-wait counts as one). 0: no resume')
            [CompletionResult]::new('--retry-wait', '--retry-wait', [CompletionResultType]::ParameterName, 'The wait before the second attempt to resume (the first goes at once), doubled after each one that fails')
            [CompletionResult]::new('--via', '--via', [CompletionResultType]::ParameterName, 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload')
            [CompletionResult]::new('--stats', '--stats', [CompletionResultType]::ParameterName, 'Format of the end-of-run report on stderr')
            [CompletionResult]::new('-L', '-L ', [CompletionResultType]::ParameterName, 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)')
            [CompletionResult]::new('--stats-fd', '--stats-fd', [CompletionResultType]::ParameterName, 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)')
            [CompletionResult]::new('--size', '--size', [CompletionResultType]::ParameterName, 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own')
            [CompletionResult]::new('--dump', '--dump', [CompletionResultType]::ParameterName, 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed')
            [CompletionResult]::new('--dump-format', '--dump-format', [CompletionResultType]::ParameterName, 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \n, \r, \t, \\, \xHH) or pcap (a TCP conversation per connection, for Wireshark)')
            [CompletionResult]::new('-k', '-k', [CompletionResultType]::ParameterName, 'SRC is a listener: take its connections one after another into DST, each whole before the next (others wait in the backlog), until SIGINT/SIGTERM (nc -lk, ncat -k). The report counts them')
            [CompletionResult]::new('--keep-open', '--keep-open', [CompletionResultType]::ParameterName, 'SRC is a listener: take its connections one after another into DST, each whole before the next (others wait in the backlog), until SIGINT/SIGTERM (nc -lk, ncat -k). The report counts them')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--progress', '--progress', [CompletionResultType]::ParameterName, 'Show a progress bar on stderr (default: only when stderr is a terminal)')
            [CompletionResult]::new('--no-progress', '--no-progress', [CompletionResultType]::ParameterName, 'Never show a progress bar')
            [CompletionResult]::new('--explain', '--explain', [CompletionResultType]::ParameterName, 'Print the plan and exit without moving data')
            [CompletionResult]::new('-4', '-4', [CompletionResultType]::ParameterName, 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error')
            [CompletionResult]::new('-6', '-6', [CompletionResultType]::ParameterName, 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'zerocat;copy' {
            [CompletionResult]::new('-t', '-t', [CompletionResultType]::ParameterName, 'Copy every source into DIR (cp -t, for xargs and find -exec ... +)')
            [CompletionResult]::new('--target-directory', '--target-directory', [CompletionResultType]::ParameterName, 'Copy every source into DIR (cp -t, for xargs and find -exec ... +)')
            [CompletionResult]::new('-u', '-u', [CompletionResultType]::ParameterName, 'Which existing destinations are replaced (coreutils 9.5): all (the default without --update), none (keep every one, as -n), older (a bare --update: only one older than its source). A destination kept is skipped and counted. -u is --update=older')
            [CompletionResult]::new('--update', '--update', [CompletionResultType]::ParameterName, 'Which existing destinations are replaced (coreutils 9.5): all (the default without --update), none (keep every one, as -n), older (a bare --update: only one older than its source). A destination kept is skipped and counted. -u is --update=older')
            [CompletionResult]::new('--reflink', '--reflink', [CompletionResultType]::ParameterName, 'Clone with FICLONE: auto (clone where the filesystem can, else copy), always (clone or fail; only with --sparse=auto, as cp), never')
            [CompletionResult]::new('--sparse', '--sparse', [CompletionResultType]::ParameterName, 'Holes: auto (a sparse source''s holes stay holes), always (also zero blocks become holes), never (write every byte: no clone and no copy_file_range, which may keep holes)')
            [CompletionResult]::new('-j', '-j', [CompletionResultType]::ParameterName, 'Copy a tree with N threads, each taking whole directories. Directories are still created before their entries and get their mode and times after them; the report and -v list entries in the walk''s order. Default: twice the CPUs available (sched_getaffinity), at most 8; -j 1 copies on one thread; -j takes at most 256. To or from s3://: N objects at once in copy -r (default 8); one object up, N parts of its multipart upload at once (its parts=, default 4; at most 64)')
            [CompletionResult]::new('--jobs', '--jobs', [CompletionResultType]::ParameterName, 'Copy a tree with N threads, each taking whole directories. Directories are still created before their entries and get their mode and times after them; the report and -v list entries in the walk''s order. Default: twice the CPUs available (sched_getaffinity), at most 8; -j 1 copies on one thread; -j takes at most 256. To or from s3://: N objects at once in copy -r (default 8); one object up, N parts of its multipart upload at once (its parts=, default 4; at most 64)')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'Hold the copy to RATE bytes per second (the global --limit; in copy, -L is cp''s --dereference, so the rate has the long form only)')
            [CompletionResult]::new('--idle-timeout', '--idle-timeout', [CompletionResultType]::ParameterName, 'An http(s) source: no byte of the body for this long is a cut, resumed as --retries says (default 30s)')
            [CompletionResult]::new('--retries', '--retries', [CompletionResultType]::ParameterName, 'An http(s) body that stops short (a reset, a close before its length, a chunked stream cut, --idle-timeout) is asked again from the next byte (Range, and If-Range its strong ETag or Last-Modified: another version is refused, never appended): at most N attempts in a row that get nowhere (a connection cut before it carried 1 MiB or lasted --retry-wait counts as one). 0: no resume')
            [CompletionResult]::new('--retry-wait', '--retry-wait', [CompletionResultType]::ParameterName, 'The wait before the second attempt to resume (the first goes at once), doubled after each one that fails')
            [CompletionResult]::new('--via', '--via', [CompletionResultType]::ParameterName, 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload')
            [CompletionResult]::new('--stats', '--stats', [CompletionResultType]::ParameterName, 'Format of the end-of-run report on stderr')
            [CompletionResult]::new('--stats-fd', '--stats-fd', [CompletionResultType]::ParameterName, 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)')
            [CompletionResult]::new('--size', '--size', [CompletionResultType]::ParameterName, 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own')
            [CompletionResult]::new('--dump', '--dump', [CompletionResultType]::ParameterName, 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed')
            [CompletionResult]::new('--dump-format', '--dump-format', [CompletionResultType]::ParameterName, 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \n, \r, \t, \\, \xHH) or pcap (a TCP conversation per connection, for Wireshark)')
            [CompletionResult]::new('-r', '-r', [CompletionResultType]::ParameterName, 'Copy directories and what they hold; symlinks are copied as symlinks (-R too)')
            [CompletionResult]::new('--recursive', '--recursive', [CompletionResultType]::ParameterName, 'Copy directories and what they hold; symlinks are copied as symlinks (-R too)')
            [CompletionResult]::new('-a', '-a', [CompletionResultType]::ParameterName, 'cp -a: -r and --preserve (symlinks are copied as symlinks in any tree)')
            [CompletionResult]::new('--archive', '--archive', [CompletionResultType]::ParameterName, 'cp -a: -r and --preserve (symlinks are copied as symlinks in any tree)')
            [CompletionResult]::new('-n', '-n', [CompletionResultType]::ParameterName, 'Never overwrite an existing destination (it is skipped and counted)')
            [CompletionResult]::new('--no-clobber', '--no-clobber', [CompletionResultType]::ParameterName, 'Never overwrite an existing destination (it is skipped and counted)')
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'A destination that cannot be opened is removed and created anew')
            [CompletionResult]::new('--force', '--force', [CompletionResultType]::ParameterName, 'A destination that cannot be opened is removed and created anew')
            [CompletionResult]::new('-p', '-p', [CompletionResultType]::ParameterName, 'Also keep exact mode bits, ownership (where permitted: not root, the group alone, if you are a member of it) and timestamps')
            [CompletionResult]::new('--preserve', '--preserve', [CompletionResultType]::ParameterName, 'Also keep exact mode bits, ownership (where permitted: not root, the group alone, if you are a member of it) and timestamps')
            [CompletionResult]::new('--resume', '--resume', [CompletionResultType]::ParameterName, 'Continue an interrupted copy: keep a destination that is a verified prefix of the source (every byte compared, 1 MiB at a time; the time it took is reported) and copy the rest; any other destination is copied again from the start')
            [CompletionResult]::new('--special', '--special', [CompletionResultType]::ParameterName, 'In a tree, recreate FIFOs and device nodes instead of refusing them (an operand given without -r is read into a file, as cp does)')
            [CompletionResult]::new('--sync', '--sync', [CompletionResultType]::ParameterName, 'fdatasync each file before counting it done: the progress bar shows bytes on disk, not in the page cache')
            [CompletionResult]::new('--verify', '--verify', [CompletionResultType]::ParameterName, 'After each file is copied (by any path, a reflink too), read it and its source back and compare them; a difference fails that file, naming the offset. With --sync the copy is read from the disk, not the page cache')
            [CompletionResult]::new('--atomic', '--atomic', [CompletionResultType]::ParameterName, 'Write each file to a temporary in its destination''s directory and rename it over the destination only when complete (and verified): an interrupted or failed copy leaves the old destination as it was. Not with --resume, which keeps a partial destination')
            [CompletionResult]::new('--debug', '--debug', [CompletionResultType]::ParameterName, 'After each file, print on stdout what ran, in cp 9.x''s words: ''a'' -> ''b'', then "copy offload: yes|no|avoided|unsupported, reflink: yes|unsupported|no, sparse detection: no|SEEK_HOLE|zeros|SEEK_HOLE + zeros"; a destination kept (--update=none, -n) gets "skipped ''b''". A stdout that cannot take the lines fails the run (exit 1)')
            [CompletionResult]::new('-T', '-T ', [CompletionResultType]::ParameterName, 'DEST is the copy itself, even when it is a directory (cp -T): one source')
            [CompletionResult]::new('--no-target-directory', '--no-target-directory', [CompletionResultType]::ParameterName, 'DEST is the copy itself, even when it is a directory (cp -T): one source')
            [CompletionResult]::new('--parents', '--parents', [CompletionResultType]::ParameterName, 'Keep each source''s path under the directory DEST (cp --parents: a/b/f -> DEST/a/b/f)')
            [CompletionResult]::new('-i', '-i', [CompletionResultType]::ParameterName, 'Ask on stderr before replacing an existing destination; a line from stdin that starts with y answers yes (cp -i). Copies one file at a time')
            [CompletionResult]::new('--interactive', '--interactive', [CompletionResultType]::ParameterName, 'Ask on stderr before replacing an existing destination; a line from stdin that starts with y answers yes (cp -i). Copies one file at a time')
            [CompletionResult]::new('-L', '-L ', [CompletionResultType]::ParameterName, 'Follow every symlink, in trees too: a link is copied as what it points to (cp -L). A link to a directory that holds it is refused ("cyclic symbolic link")')
            [CompletionResult]::new('--dereference', '--dereference', [CompletionResultType]::ParameterName, 'Follow every symlink, in trees too: a link is copied as what it points to (cp -L). A link to a directory that holds it is refused ("cyclic symbolic link")')
            [CompletionResult]::new('-H', '-H ', [CompletionResultType]::ParameterName, 'Follow the symlinks given as operands only; inside a tree they stay symlinks (cp -H)')
            [CompletionResult]::new('--dereference-command-line', '--dereference-command-line', [CompletionResultType]::ParameterName, 'Follow the symlinks given as operands only; inside a tree they stay symlinks (cp -H)')
            [CompletionResult]::new('-P', '-P ', [CompletionResultType]::ParameterName, 'Never follow a symlink: an operand that is one is copied as a symlink (cp -P; the default under -r; without -r an operand is followed)')
            [CompletionResult]::new('--no-dereference', '--no-dereference', [CompletionResultType]::ParameterName, 'Never follow a symlink: an operand that is one is copied as a symlink (cp -P; the default under -r; without -r an operand is followed)')
            [CompletionResult]::new('--remove-destination', '--remove-destination', [CompletionResultType]::ParameterName, 'Remove an existing destination before copying, instead of opening it and writing over it (cp --remove-destination): a symlink there is replaced, not written through')
            [CompletionResult]::new('-s', '-s', [CompletionResultType]::ParameterName, 'cp -s: refused with a usage error that says so (copy makes copies; ln makes links)')
            [CompletionResult]::new('--symbolic-link', '--symbolic-link', [CompletionResultType]::ParameterName, 'cp -s: refused with a usage error that says so (copy makes copies; ln makes links)')
            [CompletionResult]::new('-l', '-l', [CompletionResultType]::ParameterName, 'cp -l: refused likewise')
            [CompletionResult]::new('--link', '--link', [CompletionResultType]::ParameterName, 'cp -l: refused likewise')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--progress', '--progress', [CompletionResultType]::ParameterName, 'Show a progress bar on stderr (default: only when stderr is a terminal)')
            [CompletionResult]::new('--no-progress', '--no-progress', [CompletionResultType]::ParameterName, 'Never show a progress bar')
            [CompletionResult]::new('--explain', '--explain', [CompletionResultType]::ParameterName, 'Print the plan and exit without moving data')
            [CompletionResult]::new('-4', '-4', [CompletionResultType]::ParameterName, 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error')
            [CompletionResult]::new('-6', '-6', [CompletionResultType]::ParameterName, 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'zerocat;tee' {
            [CompletionResult]::new('--on-error', '--on-error', [CompletionResultType]::ParameterName, 'When a sink fails: stop everything (exit 1, naming it; stdout''s reader going away is a quiet 141), or drop that sink and keep feeding the others (still exit 1 at the end). fail is the default; continue is --output-error=warn; gnu is GNU tee without --output-error (a failing file is dropped and the others go on, exit 1 at the end; a reader that went away ends the run quietly, 141)')
            [CompletionResult]::new('-p', '-p', [CompletionResultType]::ParameterName, 'GNU tee''s modes: warn (drop a failing sink, feed the others, exit 1), warn-nopipe (the same, but a reader that went away (EPIPE) is dropped quietly and is no error), exit (stop at the first failing sink, EPIPE included: exit 1), exit-nopipe (a reader that went away is dropped quietly; any other error stops). Bare --output-error and -p mean warn-nopipe')
            [CompletionResult]::new('--output-error', '--output-error', [CompletionResultType]::ParameterName, 'GNU tee''s modes: warn (drop a failing sink, feed the others, exit 1), warn-nopipe (the same, but a reader that went away (EPIPE) is dropped quietly and is no error), exit (stop at the first failing sink, EPIPE included: exit 1), exit-nopipe (a reader that went away is dropped quietly; any other error stops). Bare --output-error and -p mean warn-nopipe')
            [CompletionResult]::new('--grace', '--grace', [CompletionResultType]::ParameterName, 'After SIGINT/SIGTERM, an exec:/sh: child gets SIGTERM, then SIGKILL after this long')
            [CompletionResult]::new('--idle-timeout', '--idle-timeout', [CompletionResultType]::ParameterName, 'End the run once no byte moved for this long, as pipe''s --idle-timeout')
            [CompletionResult]::new('--connect-timeout', '--connect-timeout', [CompletionResultType]::ParameterName, 'Give up connecting a tcp:, unix: or tls: endpoint after this long, as pipe''s')
            [CompletionResult]::new('--retries', '--retries', [CompletionResultType]::ParameterName, 'An http(s) body that stops short (a reset, a close before its length, a chunked stream cut, --idle-timeout) is asked again from the next byte (Range, and If-Range its strong ETag or Last-Modified: another version is refused, never appended): at most N attempts in a row that get nowhere (a connection cut before it carried 1 MiB or lasted --retry-wait counts as one). 0: no resume')
            [CompletionResult]::new('--retry-wait', '--retry-wait', [CompletionResultType]::ParameterName, 'The wait before the second attempt to resume (the first goes at once), doubled after each one that fails')
            [CompletionResult]::new('--via', '--via', [CompletionResultType]::ParameterName, 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload')
            [CompletionResult]::new('--stats', '--stats', [CompletionResultType]::ParameterName, 'Format of the end-of-run report on stderr')
            [CompletionResult]::new('-L', '-L ', [CompletionResultType]::ParameterName, 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)')
            [CompletionResult]::new('--stats-fd', '--stats-fd', [CompletionResultType]::ParameterName, 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)')
            [CompletionResult]::new('--size', '--size', [CompletionResultType]::ParameterName, 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own')
            [CompletionResult]::new('--dump', '--dump', [CompletionResultType]::ParameterName, 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed')
            [CompletionResult]::new('--dump-format', '--dump-format', [CompletionResultType]::ParameterName, 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \n, \r, \t, \\, \xHH) or pcap (a TCP conversation per connection, for Wireshark)')
            [CompletionResult]::new('-a', '-a', [CompletionResultType]::ParameterName, 'Append to the file sinks instead of truncating them (GNU tee -a; file:X,append)')
            [CompletionResult]::new('--append', '--append', [CompletionResultType]::ParameterName, 'Append to the file sinks instead of truncating them (GNU tee -a; file:X,append)')
            [CompletionResult]::new('-i', '-i', [CompletionResultType]::ParameterName, 'Ignore SIGINT (GNU tee -i): a Ctrl-C meant for the command feeding the pipe does not cut the copy short; SIGTERM still stops it')
            [CompletionResult]::new('--ignore-interrupts', '--ignore-interrupts', [CompletionResultType]::ParameterName, 'Ignore SIGINT (GNU tee -i): a Ctrl-C meant for the command feeding the pipe does not cut the copy short; SIGTERM still stops it')
            [CompletionResult]::new('--keep-open', '--keep-open', [CompletionResultType]::ParameterName, 'SRC is a listener: take its connections one after another, each whole into every DST before the next (others wait in the backlog), until SIGINT/SIGTERM, as pipe''s')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--progress', '--progress', [CompletionResultType]::ParameterName, 'Show a progress bar on stderr (default: only when stderr is a terminal)')
            [CompletionResult]::new('--no-progress', '--no-progress', [CompletionResultType]::ParameterName, 'Never show a progress bar')
            [CompletionResult]::new('--explain', '--explain', [CompletionResultType]::ParameterName, 'Print the plan and exit without moving data')
            [CompletionResult]::new('-4', '-4', [CompletionResultType]::ParameterName, 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error')
            [CompletionResult]::new('-6', '-6', [CompletionResultType]::ParameterName, 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'zerocat;relay' {
            [CompletionResult]::new('--balance', '--balance', [CompletionResultType]::ParameterName, 'With several upstreams, which one a connection gets: failover (the first that is up), round-robin, least-conn (fewest open), source-hash (by the client''s IP address)')
            [CompletionResult]::new('--down-for', '--down-for', [CompletionResultType]::ParameterName, 'With several upstreams, skip one that failed a connection (refused, timed out, reset or TLS failed before any byte moved) for this long. 0: never skip')
            [CompletionResult]::new('--check-interval', '--check-interval', [CompletionResultType]::ParameterName, 'With several upstreams, probe each this often (a TCP or unix connect; a TLS handshake for tls:): one that fails is down for --down-for, one that answers is up')
            [CompletionResult]::new('--limit-total', '--limit-total', [CompletionResultType]::ParameterName, 'Hold all connections together to RATE bytes per second each way (-L/--limit holds each direction of each connection)')
            [CompletionResult]::new('--exit-idle', '--exit-idle', [CompletionResultType]::ParameterName, 'With an inherited listener (systemd:, fd:N): exit 0 after this long with no connection open, leaving the listening socket to systemd (a client arriving then waits in its backlog for the next activation)')
            [CompletionResult]::new('--max-conns', '--max-conns', [CompletionResultType]::ParameterName, 'Connections served at once; more wait in the listen backlog. Default: what the open-file limit holds, (limit - 16) / 7 (two sockets and a pipe each way, and one connection still greeting), after raising the soft limit to the hard one. A TLS or `proxy` listener also has at most this many (and 1,024) connections greeting, half of them from one address: past that the oldest greeting is closed for the newcomer. UDP: sessions open at once (a new client''s datagrams beyond it are dropped and counted)')
            [CompletionResult]::new('--idle-timeout', '--idle-timeout', [CompletionResultType]::ParameterName, 'Close a connection that moved no byte either way for this long (500ms, 30s, 5m). UDP: a session ends after this long without a datagram (default 60s)')
            [CompletionResult]::new('--connect-timeout', '--connect-timeout', [CompletionResultType]::ParameterName, 'Give up a connection attempt after this long (each attempt of retry=N); also how long a `proxy` or TLS listener waits for a PROXY header and handshake (default 5 s)')
            [CompletionResult]::new('--linger', '--linger', [CompletionResultType]::ParameterName, 'Once one direction of a connection has ended (EOF, passed on as a half-close), give the other at most this long, then end the connection cleanly (nc -q, ncat -q; 0: at once). Without it, the other direction goes on until its own EOF')
            [CompletionResult]::new('--grace', '--grace', [CompletionResultType]::ParameterName, 'After SIGINT/SIGTERM: stop accepting, let the connections in flight finish for this long, then cut (reset) the rest; a second signal cuts them at once. 0: cut at once. A command side''s child (exec:, sh:) of a cut connection then gets SIGTERM, and SIGKILL after this long again')
            [CompletionResult]::new('--log', '--log', [CompletionResultType]::ParameterName, 'Write one JSON line per connection as it ends, into PATH (appended; a FIFO works) or `-` (stderr); the fields are listed under RELAY LOG')
            [CompletionResult]::new('-j', '-j', [CompletionResultType]::ParameterName, 'Event loops serving a listener, each in a thread of its own; the listener is shared and a new connection goes to a loop that is waiting. Default: the CPUs available to the process, one below 4 CPUs. A TLS or `proxy` listener too: every loop takes handshakes. One session (no listener) or --once: one (the plan line says so). At most 256')
            [CompletionResult]::new('--workers', '--workers', [CompletionResultType]::ParameterName, 'Event loops serving a listener, each in a thread of its own; the listener is shared and a new connection goes to a loop that is waiting. Default: the CPUs available to the process, one below 4 CPUs. A TLS or `proxy` listener too: every loop takes handshakes. One session (no listener) or --once: one (the plan line says so). At most 256')
            [CompletionResult]::new('--via', '--via', [CompletionResultType]::ParameterName, 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload')
            [CompletionResult]::new('--stats', '--stats', [CompletionResultType]::ParameterName, 'Format of the end-of-run report on stderr')
            [CompletionResult]::new('-L', '-L ', [CompletionResultType]::ParameterName, 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)')
            [CompletionResult]::new('--stats-fd', '--stats-fd', [CompletionResultType]::ParameterName, 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)')
            [CompletionResult]::new('--size', '--size', [CompletionResultType]::ParameterName, 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own')
            [CompletionResult]::new('--dump', '--dump', [CompletionResultType]::ParameterName, 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed')
            [CompletionResult]::new('--dump-format', '--dump-format', [CompletionResultType]::ParameterName, 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \n, \r, \t, \\, \xHH) or pcap (a TCP conversation per connection, for Wireshark)')
            [CompletionResult]::new('--once', '--once', [CompletionResultType]::ParameterName, 'Serve one connection, then exit')
            [CompletionResult]::new('--splice-first', '--splice-first', [CompletionResultType]::ParameterName, 'Under auto, start every direction with splice, as if a bulk read had moved it there (the fault-injection and tiny-segment tests aim at splice)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--progress', '--progress', [CompletionResultType]::ParameterName, 'Show a progress bar on stderr (default: only when stderr is a terminal)')
            [CompletionResult]::new('--no-progress', '--no-progress', [CompletionResultType]::ParameterName, 'Never show a progress bar')
            [CompletionResult]::new('--explain', '--explain', [CompletionResultType]::ParameterName, 'Print the plan and exit without moving data')
            [CompletionResult]::new('-4', '-4', [CompletionResultType]::ParameterName, 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error')
            [CompletionResult]::new('-6', '-6', [CompletionResultType]::ParameterName, 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'zerocat;probe' {
            [CompletionResult]::new('--wait', '--wait', [CompletionResultType]::ParameterName, 'Try again (every 250 ms) the targets not open yet until all are (exit 0) or this long has passed (exit 1): a container''s entrypoint waiting for its database')
            [CompletionResult]::new('--connect-timeout', '--connect-timeout', [CompletionResultType]::ParameterName, 'Each try at a target (connect, and a tls: handshake) gives up after this long and says timeout (nc -w)')
            [CompletionResult]::new('--via', '--via', [CompletionResultType]::ParameterName, 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload')
            [CompletionResult]::new('--stats', '--stats', [CompletionResultType]::ParameterName, 'Format of the end-of-run report on stderr')
            [CompletionResult]::new('-L', '-L ', [CompletionResultType]::ParameterName, 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)')
            [CompletionResult]::new('--stats-fd', '--stats-fd', [CompletionResultType]::ParameterName, 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)')
            [CompletionResult]::new('--size', '--size', [CompletionResultType]::ParameterName, 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own')
            [CompletionResult]::new('--dump', '--dump', [CompletionResultType]::ParameterName, 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed')
            [CompletionResult]::new('--dump-format', '--dump-format', [CompletionResultType]::ParameterName, 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \n, \r, \t, \\, \xHH) or pcap (a TCP conversation per connection, for Wireshark)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--progress', '--progress', [CompletionResultType]::ParameterName, 'Show a progress bar on stderr (default: only when stderr is a terminal)')
            [CompletionResult]::new('--no-progress', '--no-progress', [CompletionResultType]::ParameterName, 'Never show a progress bar')
            [CompletionResult]::new('--explain', '--explain', [CompletionResultType]::ParameterName, 'Print the plan and exit without moving data')
            [CompletionResult]::new('-4', '-4', [CompletionResultType]::ParameterName, 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error')
            [CompletionResult]::new('-6', '-6', [CompletionResultType]::ParameterName, 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'zerocat;completions' {
            [CompletionResult]::new('--via', '--via', [CompletionResultType]::ParameterName, 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload')
            [CompletionResult]::new('--stats', '--stats', [CompletionResultType]::ParameterName, 'Format of the end-of-run report on stderr')
            [CompletionResult]::new('-L', '-L ', [CompletionResultType]::ParameterName, 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)')
            [CompletionResult]::new('--stats-fd', '--stats-fd', [CompletionResultType]::ParameterName, 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)')
            [CompletionResult]::new('--size', '--size', [CompletionResultType]::ParameterName, 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own')
            [CompletionResult]::new('--dump', '--dump', [CompletionResultType]::ParameterName, 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed')
            [CompletionResult]::new('--dump-format', '--dump-format', [CompletionResultType]::ParameterName, 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \n, \r, \t, \\, \xHH) or pcap (a TCP conversation per connection, for Wireshark)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--progress', '--progress', [CompletionResultType]::ParameterName, 'Show a progress bar on stderr (default: only when stderr is a terminal)')
            [CompletionResult]::new('--no-progress', '--no-progress', [CompletionResultType]::ParameterName, 'Never show a progress bar')
            [CompletionResult]::new('--explain', '--explain', [CompletionResultType]::ParameterName, 'Print the plan and exit without moving data')
            [CompletionResult]::new('-4', '-4', [CompletionResultType]::ParameterName, 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error')
            [CompletionResult]::new('-6', '-6', [CompletionResultType]::ParameterName, 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'zerocat;man' {
            [CompletionResult]::new('--via', '--via', [CompletionResultType]::ParameterName, 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload')
            [CompletionResult]::new('--stats', '--stats', [CompletionResultType]::ParameterName, 'Format of the end-of-run report on stderr')
            [CompletionResult]::new('-L', '-L ', [CompletionResultType]::ParameterName, 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)')
            [CompletionResult]::new('--stats-fd', '--stats-fd', [CompletionResultType]::ParameterName, 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)')
            [CompletionResult]::new('--size', '--size', [CompletionResultType]::ParameterName, 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own')
            [CompletionResult]::new('--dump', '--dump', [CompletionResultType]::ParameterName, 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed')
            [CompletionResult]::new('--dump-format', '--dump-format', [CompletionResultType]::ParameterName, 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \n, \r, \t, \\, \xHH) or pcap (a TCP conversation per connection, for Wireshark)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--progress', '--progress', [CompletionResultType]::ParameterName, 'Show a progress bar on stderr (default: only when stderr is a terminal)')
            [CompletionResult]::new('--no-progress', '--no-progress', [CompletionResultType]::ParameterName, 'Never show a progress bar')
            [CompletionResult]::new('--explain', '--explain', [CompletionResultType]::ParameterName, 'Print the plan and exit without moving data')
            [CompletionResult]::new('-4', '-4', [CompletionResultType]::ParameterName, 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error')
            [CompletionResult]::new('-6', '-6', [CompletionResultType]::ParameterName, 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'zerocat;nc' {
            [CompletionResult]::new('--via', '--via', [CompletionResultType]::ParameterName, 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload')
            [CompletionResult]::new('--stats', '--stats', [CompletionResultType]::ParameterName, 'Format of the end-of-run report on stderr')
            [CompletionResult]::new('-L', '-L ', [CompletionResultType]::ParameterName, 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)')
            [CompletionResult]::new('--stats-fd', '--stats-fd', [CompletionResultType]::ParameterName, 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)')
            [CompletionResult]::new('--size', '--size', [CompletionResultType]::ParameterName, 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own')
            [CompletionResult]::new('--dump', '--dump', [CompletionResultType]::ParameterName, 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed')
            [CompletionResult]::new('--dump-format', '--dump-format', [CompletionResultType]::ParameterName, 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \n, \r, \t, \\, \xHH) or pcap (a TCP conversation per connection, for Wireshark)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--progress', '--progress', [CompletionResultType]::ParameterName, 'Show a progress bar on stderr (default: only when stderr is a terminal)')
            [CompletionResult]::new('--no-progress', '--no-progress', [CompletionResultType]::ParameterName, 'Never show a progress bar')
            [CompletionResult]::new('--explain', '--explain', [CompletionResultType]::ParameterName, 'Print the plan and exit without moving data')
            [CompletionResult]::new('-4', '-4', [CompletionResultType]::ParameterName, 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error')
            [CompletionResult]::new('-6', '-6', [CompletionResultType]::ParameterName, 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'zerocat;pv' {
            [CompletionResult]::new('--via', '--via', [CompletionResultType]::ParameterName, 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload')
            [CompletionResult]::new('--stats', '--stats', [CompletionResultType]::ParameterName, 'Format of the end-of-run report on stderr')
            [CompletionResult]::new('-L', '-L ', [CompletionResultType]::ParameterName, 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)')
            [CompletionResult]::new('--stats-fd', '--stats-fd', [CompletionResultType]::ParameterName, 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)')
            [CompletionResult]::new('--size', '--size', [CompletionResultType]::ParameterName, 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own')
            [CompletionResult]::new('--dump', '--dump', [CompletionResultType]::ParameterName, 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed')
            [CompletionResult]::new('--dump-format', '--dump-format', [CompletionResultType]::ParameterName, 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \n, \r, \t, \\, \xHH) or pcap (a TCP conversation per connection, for Wireshark)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--progress', '--progress', [CompletionResultType]::ParameterName, 'Show a progress bar on stderr (default: only when stderr is a terminal)')
            [CompletionResult]::new('--no-progress', '--no-progress', [CompletionResultType]::ParameterName, 'Never show a progress bar')
            [CompletionResult]::new('--explain', '--explain', [CompletionResultType]::ParameterName, 'Print the plan and exit without moving data')
            [CompletionResult]::new('-4', '-4', [CompletionResultType]::ParameterName, 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error')
            [CompletionResult]::new('-6', '-6', [CompletionResultType]::ParameterName, 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'zerocat;compat' {
            [CompletionResult]::new('--via', '--via', [CompletionResultType]::ParameterName, 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload')
            [CompletionResult]::new('--stats', '--stats', [CompletionResultType]::ParameterName, 'Format of the end-of-run report on stderr')
            [CompletionResult]::new('-L', '-L ', [CompletionResultType]::ParameterName, 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)')
            [CompletionResult]::new('--stats-fd', '--stats-fd', [CompletionResultType]::ParameterName, 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)')
            [CompletionResult]::new('--size', '--size', [CompletionResultType]::ParameterName, 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own')
            [CompletionResult]::new('--dump', '--dump', [CompletionResultType]::ParameterName, 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed')
            [CompletionResult]::new('--dump-format', '--dump-format', [CompletionResultType]::ParameterName, 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \n, \r, \t, \\, \xHH) or pcap (a TCP conversation per connection, for Wireshark)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--progress', '--progress', [CompletionResultType]::ParameterName, 'Show a progress bar on stderr (default: only when stderr is a terminal)')
            [CompletionResult]::new('--no-progress', '--no-progress', [CompletionResultType]::ParameterName, 'Never show a progress bar')
            [CompletionResult]::new('--explain', '--explain', [CompletionResultType]::ParameterName, 'Print the plan and exit without moving data')
            [CompletionResult]::new('-4', '-4', [CompletionResultType]::ParameterName, 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error')
            [CompletionResult]::new('-6', '-6', [CompletionResultType]::ParameterName, 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'zerocat;install-links' {
            [CompletionResult]::new('--via', '--via', [CompletionResultType]::ParameterName, 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload')
            [CompletionResult]::new('--stats', '--stats', [CompletionResultType]::ParameterName, 'Format of the end-of-run report on stderr')
            [CompletionResult]::new('-L', '-L ', [CompletionResultType]::ParameterName, 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)')
            [CompletionResult]::new('--stats-fd', '--stats-fd', [CompletionResultType]::ParameterName, 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)')
            [CompletionResult]::new('--size', '--size', [CompletionResultType]::ParameterName, 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own')
            [CompletionResult]::new('--dump', '--dump', [CompletionResultType]::ParameterName, 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed')
            [CompletionResult]::new('--dump-format', '--dump-format', [CompletionResultType]::ParameterName, 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \n, \r, \t, \\, \xHH) or pcap (a TCP conversation per connection, for Wireshark)')
            [CompletionResult]::new('--force', '--force', [CompletionResultType]::ParameterName, 'Replace what already has one of those names there')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--progress', '--progress', [CompletionResultType]::ParameterName, 'Show a progress bar on stderr (default: only when stderr is a terminal)')
            [CompletionResult]::new('--no-progress', '--no-progress', [CompletionResultType]::ParameterName, 'Never show a progress bar')
            [CompletionResult]::new('--explain', '--explain', [CompletionResultType]::ParameterName, 'Print the plan and exit without moving data')
            [CompletionResult]::new('-4', '-4', [CompletionResultType]::ParameterName, 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error')
            [CompletionResult]::new('-6', '-6', [CompletionResultType]::ParameterName, 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'zerocat;version' {
            [CompletionResult]::new('--via', '--via', [CompletionResultType]::ParameterName, 'Force a path: auto, copy_file_range, sendfile, splice, tee, userspace (`-` and `_` are interchangeable). A forced path the fds cannot take is an error before any byte moves; `--via userspace` copies through memory, trusting no offload')
            [CompletionResult]::new('--stats', '--stats', [CompletionResultType]::ParameterName, 'Format of the end-of-run report on stderr')
            [CompletionResult]::new('-L', '-L ', [CompletionResultType]::ParameterName, 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G (binary units, pv''s -L). The kernel path stays the same; only the length of each call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`, -L is cp''s --dereference: write --limit there (or -L before the command)')
            [CompletionResult]::new('--stats-fd', '--stats-fd', [CompletionResultType]::ParameterName, 'Write the end-of-run report to this inherited fd instead of stderr (with --stats json: one JSON object there, also for a run that failed before any byte moved)')
            [CompletionResult]::new('--size', '--size', [CompletionResultType]::ParameterName, 'Expected size of a stream (binary units: 700M), so the progress bar shows a percentage and ETA where the source has no size of its own')
            [CompletionResult]::new('--dump', '--dump', [CompletionResultType]::ParameterName, 'relay, pipe, tee: write every byte that passes into FILE, per connection and direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the dump; copy_file_range and sendfile become splice through a pipe); the dump never slows it: what it cannot keep up with is counted as missed')
            [CompletionResult]::new('--dump-format', '--dump-format', [CompletionResultType]::ParameterName, 'Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped as \n, \r, \t, \\, \xHH) or pcap (a TCP conversation per connection, for Wireshark)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No report line, no progress')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data')
            [CompletionResult]::new('--progress', '--progress', [CompletionResultType]::ParameterName, 'Show a progress bar on stderr (default: only when stderr is a terminal)')
            [CompletionResult]::new('--no-progress', '--no-progress', [CompletionResultType]::ParameterName, 'Never show a progress bar')
            [CompletionResult]::new('--explain', '--explain', [CompletionResultType]::ParameterName, 'Print the plan and exit without moving data')
            [CompletionResult]::new('-4', '-4', [CompletionResultType]::ParameterName, 'IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a usage error')
            [CompletionResult]::new('-6', '-6', [CompletionResultType]::ParameterName, 'IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'zerocat;help' {
            [CompletionResult]::new('pipe', 'pipe', [CompletionResultType]::ParameterValue, 'Move one stream from SRC to DST')
            [CompletionResult]::new('copy', 'copy', [CompletionResultType]::ParameterValue, 'Copy files and trees: reflink, then copy_file_range, splice, userspace')
            [CompletionResult]::new('tee', 'tee', [CompletionResultType]::ParameterValue, 'Send every byte of SRC to every DST (files, pipes, sockets, listeners)')
            [CompletionResult]::new('relay', 'relay', [CompletionResultType]::ParameterValue, 'Relay bytes both ways between A and B; a listener serves every connection')
            [CompletionResult]::new('probe', 'probe', [CompletionResultType]::ParameterValue, 'Is something answering? Connect to each TARGET and close at once (nc -z, wait-for-it)')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Print a shell completion script')
            [CompletionResult]::new('man', 'man', [CompletionResultType]::ParameterValue, 'Print the man page (roff)')
            [CompletionResult]::new('nc', 'nc', [CompletionResultType]::ParameterValue, 'Answer as netcat: OpenBSD nc''s flags (also: a link named nc, netcat or ncat)')
            [CompletionResult]::new('pv', 'pv', [CompletionResultType]::ParameterValue, 'Answer as pv: pv''s flags, pv''s display (also: a link named pv)')
            [CompletionResult]::new('compat', 'compat', [CompletionResultType]::ParameterValue, 'Answer as nc, netcat, ncat, tee (GNU tee''s grammar) or pv: `zerocat compat tee -a log`')
            [CompletionResult]::new('install-links', 'install-links', [CompletionResultType]::ParameterValue, 'Make links named nc, netcat, ncat, tee and pv to this zerocat in DIR')
            [CompletionResult]::new('version', 'version', [CompletionResultType]::ParameterValue, 'Print the version; with -v, also the commit, the kernel and what it offers (for a bug report)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'zerocat;help;pipe' {
            break
        }
        'zerocat;help;copy' {
            break
        }
        'zerocat;help;tee' {
            break
        }
        'zerocat;help;relay' {
            break
        }
        'zerocat;help;probe' {
            break
        }
        'zerocat;help;completions' {
            break
        }
        'zerocat;help;man' {
            break
        }
        'zerocat;help;nc' {
            break
        }
        'zerocat;help;pv' {
            break
        }
        'zerocat;help;compat' {
            break
        }
        'zerocat;help;install-links' {
            break
        }
        'zerocat;help;version' {
            break
        }
        'zerocat;help;help' {
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}
