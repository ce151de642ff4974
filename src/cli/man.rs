//! The man page's own sections (roff), after the ones clap_mangen renders from the clap
//! definition: the URI grammar, the path table, the report, signals, exit codes, examples.
//! `cli::man_page` puts them together; `man/zerocat.1` is the committed result (a test
//! fails when it is stale; `UPDATE_GENERATED=1 cargo test` rewrites it).
//!
//! Adding a subcommand: give it 2–4 examples in its `after_help` (cli.rs), add them to
//! EXAMPLES below, and document any report field it adds under REPORT.
//!
//! Adding a scheme or an option word: a row of `endpoint::SCHEME_TABLE` puts it in the
//! ENDPOINTS list here, `--help` and the completions; its details go in SECTIONS' "Each
//! endpoint in detail", and README's endpoint table is written by hand.

use std::fmt::Write as _;

/// The whole page: title, name, synopsis, description and options from clap_mangen;
/// COMMANDS from each subcommand's arguments and examples; ENDPOINTS' list from the
/// grammar's scheme table; then [`SECTIONS`].
pub fn page(cmd: clap::Command) -> String {
    let commands = commands_section(&cmd);
    let man = clap_mangen::Man::new(cmd).manual("zerocat manual");
    let mut out = Vec::new();
    let rendered = man
        .render_title(&mut out)
        .and_then(|_| man.render_name_section(&mut out))
        .and_then(|_| man.render_synopsis_section(&mut out))
        .and_then(|_| man.render_description_section(&mut out))
        .and_then(|_| man.render_options_section(&mut out));
    rendered.expect("writing to a Vec cannot fail");
    out.extend_from_slice(commands.as_bytes());
    out.extend_from_slice(endpoints_list().as_bytes());
    out.extend_from_slice(SECTIONS.as_bytes());
    man.render_version_section(&mut out)
        .expect("writing to a Vec cannot fail");
    String::from_utf8_lossy(&out).into_owned()
}

/// One entry per subcommand: its usage, what it does, its arguments, its examples.
fn commands_section(cmd: &clap::Command) -> String {
    let mut s = String::from(".SH COMMANDS\n");
    for sub in cmd.get_subcommands().filter(|c| !c.is_hide_set()) {
        let mut usage = format!("\\fBzerocat {}\\fR", roff(sub.get_name()));
        for arg in sub.get_positionals() {
            let name = arg.get_value_names().map_or_else(
                || arg.get_id().as_str().to_uppercase(),
                |names| names.join(" "),
            );
            let name = format!("\\fI{}\\fR", roff(&name));
            let _ = if arg.is_required_set() {
                write!(usage, " {name}")
            } else {
                write!(usage, " [{name}]")
            };
            if matches!(arg.get_num_args(), Some(r) if r.max_values() > 1) {
                usage.push_str("...");
            }
        }
        let _ = writeln!(s, ".TP\n{usage}");
        if let Some(about) = sub.get_long_about().or(sub.get_about()) {
            let _ = writeln!(s, "{}", roff(&about.to_string()));
        }
        for arg in sub.get_arguments().filter(|a| !a.is_hide_set()) {
            let name = match (arg.get_short(), arg.get_long()) {
                (_, Some(long)) => format!("\\-\\-{}", roff(long)),
                (Some(short), None) => format!("\\-{short}"),
                (None, None) => arg.get_id().as_str().to_uppercase(),
            };
            if let Some(help) = arg.get_long_help().or(arg.get_help()) {
                let _ = writeln!(
                    s,
                    ".RS\n.TP\n\\fI{name}\\fR\n{}\n.RE",
                    roff(&help.to_string())
                );
            }
        }
        if let Some(after) = sub.get_after_long_help().or(sub.get_after_help()) {
            let _ = writeln!(s, ".RS\n.PP\n.nf\n{}\n.fi\n.RE", roff(&after.to_string()));
        }
    }
    s
}

/// Escapes text for roff: backslashes, hyphens, and a leading `.` or `'`.
fn roff(text: &str) -> String {
    text.lines()
        .map(|line| {
            let line = line.replace('\\', "\\e").replace('-', "\\-");
            if line.starts_with('.') || line.starts_with('\'') {
                format!("\\&{line}")
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// ENDPOINTS up to the details: every scheme of the grammar's table, what it is at each
/// end, and each option word with what it does.
fn endpoints_list() -> String {
    let mut s = String::from(
        ".SH ENDPOINTS\n\
         Every SRC and DST is an endpoint: \\fB\\-\\fR (stdin as a source, stdout as a sink), a \
         file \\fIPATH\\fR, or \\fISCHEME\\fB:\\fIADDRESS\\fR[\\fB,\\fIOPTION\\fR]...\n\
         Scheme keywords are case\\-insensitive (\\fBTCP\\-LISTEN:8080\\fR works);\n\
         options follow a comma, socat style. The schemes, then each in detail:\n",
    );
    for info in crate::endpoint::SCHEME_TABLE {
        let mut head = format!("\\fB{}:\\fI{}\\fR", roff(info.name), roff(info.address));
        for alias in info.aliases {
            let _ = write!(head, " (alias \\fB{}:\\fR)", roff(alias));
        }
        let _ = writeln!(
            s,
            ".TP\n{head}\nAs a source: {}. As a sink: {}.",
            roff(info.as_source),
            roff(info.as_sink)
        );
        if info.options.is_empty() {
            continue;
        }
        s.push_str(".RS\n");
        for option in info.options {
            let form = match option.form.split_once('=') {
                Some((word, value)) => format!("\\fB,{}=\\fI{}\\fR", roff(word), roff(value)),
                None => format!("\\fB,{}\\fR", roff(option.form)),
            };
            let _ = writeln!(s, ".TP\n{form}\n{}", roff(option.meaning));
        }
        s.push_str(".RE\n");
    }
    s
}

/// Roff text: the details of ENDPOINTS, then each section starting with `.SH`.
pub const SECTIONS: &str = r#".SS "Each endpoint in detail"
.TP
\fB\-\fR
stdin as a source, stdout as a sink. \fB\-,raw,echo=0\fR (and \fBfile:\fI/dev/tty...\fB,raw\fR,
\fBecho=0|1\fR): the terminal (stdin's, when stdin is one; the file, which must be one)
is set for the run \(em \fBraw\fR: bytes as they are, no line editing, no signals from keys
(a Ctrl\-C goes through as a byte), no output processing; \fBecho=0\fR: no echo \(em and
\fBalways put back\fR: at the end, after an error, on SIGINT, SIGTERM, SIGHUP and SIGQUIT
(a handler puts it back, then the signal ends zerocat as it would have), and around
SIGTSTP (put back while stopped, raw again when continued). The classic remote shell:
\fBzerocat relay \-,raw,echo=0 tcp:\fIHOST\fB:\fIPORT\fR against \fBzerocat relay
tcp\-listen:\fIPORT\fB sh:bash,pty\fR. The mode is set with SIGTTOU ignored: a zerocat
in a background process group (a shell without job control under \fBdocker run \-ti\fR,
\fBcmd &\fR) sets it instead of being stopped (socat's exit 150).
.TP
\fBfd:\fIN\fR
the inherited file descriptor \fIN\fR. When \fIN\fR is a listening socket
(\fBSO_ACCEPTCONN\fR), it is a listener like \fBtcp\-listen:\fR: its address is announced,
pipe accepts one connection, relay serves every one. An \fIN\fR that is not open is an
error before any byte moves.
.TP
\fBfile:\fIPATH\fR, or a bare \fIPATH\fR
a file: opened read\-only as a source; created or truncated as a sink (like \fB>\fR and
\fBcp\fR). Options, for a sink only (on a source they are usage errors): \fBappend\fR,
\fBexcl\fR (refuse an existing file), \fBmode=\fI0600\fR (exactly this mode, whatever the
umask, for a file zerocat creates; an existing file keeps its mode, as with \fB>\fR and
\fBcp\fR). A path is bytes, as Linux has it: a name that is not UTF\-8 is taken byte for
byte (bare or after \fBfile:\fR; reports show it with U+FFFD); the address of any other
scheme, and options, are text. After \fBfile:\fR the first comma starts the options:
a comma of the path is written \fB\e,\fR and a backslash before a comma or a backslash
\fB\e\e\fR (\fBfile:a\e,b,append\fR appends to \fBa,b\fR); a bare path takes every
character as it is.
.TP
\fBtcp:\fIHOST\fB:\fIPORT\fR
connect. IPv6 goes in brackets: \fBtcp:[::1]:8080\fR. \fIHOST\fR may be a name; it is
resolved once. Options: \fBretry=\fIN\fR, \fBinterval=\fIDURATION\fR, and
\fBproxy=v1\fR or \fBproxy=v2\fR: send a PROXY protocol header first (text v1 or binary
v2, HAProxy's \fBsend\-proxy\fR / \fBsend\-proxy\-v2\fR), carrying the client of the
connection accepted on the other side (or the client a PROXY header named, with
\fBproxy\fR there), then the stream, which still moves by \fBsplice\fR. With no client to
name (a file or stdin on the other side) it sends UNKNOWN (v1) or LOCAL (v2).
\fBsocks5=\fIPROXYHOST\fB:\fIPORT\fR goes out through a SOCKS5 proxy (RFC 1928), which
resolves \fIHOST\fR itself (as \fBnc \-X 5 \-x\fR); \fBconnect=\fIPROXYHOST\fB:\fIPORT\fR
through an HTTP proxy's CONNECT; \fBproxy\-auth=\fIUSER\fB:\fIPASS\fR (or
\fBZEROCAT_PROXY_AUTH\fR) authenticates to either (RFC 1929, Basic); a comma of the
password is written \fB\e,\fR. The password is never shown (messages, \fB\-\-explain\fR,
reports and logs write the endpoint without it), and \fBZEROCAT_PROXY_AUTH\fR is removed
from the environment of \fBexec:\fR/\fBsh:\fR children. The handshake is a
few bytes in userspace, then the stream moves as on any socket. A refusing proxy is exit 1
naming its reply; a proxy that closes, answers garbage or stalls past
\fB\-\-connect\-timeout\fR (relay; 30 s otherwise) is exit 1 naming it. With
\fBproxy=v1|v2\fR the PROXY header goes inside the tunnel, to the target. In \fBrelay\fR
each connection's handshake runs in the event loop. As ssh's ProxyCommand:
\fBssh \-o ProxyCommand='zerocat relay \- tcp:%h:%p,socks5=127.0.0.1:1080' host\fR.
A URL\-style \fBtcp://\fIHOST\fB:\fIPORT\fR (also \fBudp://\fR) and a \fBtcp:\fIPORT\fR
with no host are usage errors that show the spelling meant (nothing is looked up);
socat's \fBfork\fR is one too (relay serves every connection), its \fBreuseaddr\fR is
accepted on \fBtcp\-listen:\fR (always on). The bare words \fBSTDIO\fR, \fBSTDIN\fR and
\fBSTDOUT\fR are refused with the hint \fB\-\fR (a file of that name is \fB./STDIO\fR).
netcat's own command lines typed at zerocat (\fBzerocat \-l 9000\fR, \fBzerocat\fR
\fIHOST PORT\fR, with \fB\-u\fR) are usage errors that show the zerocat spelling
(\fBzerocat pipe tcp\-listen:9000 \-\fR, \fBzerocat relay \- tcp:\fIHOST\fB:\fIPORT\fR).
\fBmptcp\fR: an MPTCP socket (\fBIPPROTO_MPTCP\fR, as \fBmptcpize\fR would make it), see
\fBtcp\-listen:\fR's \fBmptcp\fR. \fBframe=len16\fR (here and on \fBtcp\-listen:\fR):
in a \fBrelay\fR whose other side is \fBudp:\fR or \fBudp\-listen:\fR, each datagram
travels behind a 2\-byte big\-endian length (see \fBudp\-listen:\fR below).
.TP
\fBtcp\-listen:\fR[\fIHOST\fB:\fR]\fIPORT\fR (alias \fBtcp\-l:\fR)
accept one connection (relay: every connection). Options:
.RS
.TP
\fBbacklog=\fIN\fR
the listen(2) backlog (default 4096, which the kernel caps at net.core.somaxconn).
.TP
\fBreuseport\fR
\fBSO_REUSEPORT\fR: several zerocat processes listen on one port and the kernel spreads
the connections among them (each must set it).
.TP
\fBipv6only=0\fR|\fB1\fR
for an IPv6 address such as \fB[::]\fR: \fB0\fR (the default, set whatever the
\fBnet.ipv6.bindv6only\fR sysctl says) is dual\-stack, \fB[::]:\fIP\fR also takes IPv4
clients (as ::ffff:a.b.c.d) and so also holds \fB0.0.0.0:\fIP\fR; \fB1\fR is IPv6 only,
so \fBtcp\-listen:[::]:\fIP\fB,ipv6only=1\fR and \fBtcp\-listen:0.0.0.0:\fIP\fR run side
by side. On an IPv4 address it is a usage error.
.TP
\fBproxy\fR
every connection starts with a PROXY protocol header (v1 or v2, whichever comes), as
HAProxy's \fBsend\-proxy\fR / \fBsend\-proxy\-v2\fR and other load balancers send it. It
is read before any payload, within \fB\-\-connect\-timeout\fR (default 5 s; pipe: 5 s);
a connection whose header is missing, malformed, longer than 4112 bytes or late is
closed, never relayed, and counted (relay: a connection that ended with \fBerror\fR,
text \fBPROXY header: ...\fR, also said on stderr unless \fB\-q\fR). The client the
header names is the connection's \fBpeer\fR in reports, and what a \fBproxy=\fR
connector passes on. A LOCAL (v2) or UNKNOWN (v1) header keeps the real peer.
.TP
\fBmptcp\fR
(also on \fBtcp:\fR) the socket is MPTCP (\fBIPPROTO_MPTCP\fR, Multipath TCP, RFC 8684).
Where the kernel refuses one (\fBENOPROTOOPT\fR when \fBnet.mptcp.enabled\fR is 0,
\fBEPROTONOSUPPORT\fR in a kernel without MPTCP) a plain TCP socket serves instead,
before any byte moves; a peer without MPTCP makes the kernel fall back to TCP on that
connection. The report says which ran: the text report's kind reads \fBsocket (mptcp)\fR,
\fBsocket (tcp: mptcp refused, ENOPROTOOPT)\fR or \fBsocket (tcp: the peer has no
MPTCP)\fR, and JSON has \fBmptcp\fR (below). MPTCP sockets splice and sendfile as TCP ones
do (checked on Linux 6.18): the paths are the same.
.RE
.TP
\fBunix:\fIPATH\fR, \fBunix:@\fINAME\fR
connect to a unix socket; \fB@\fR names an abstract socket.
.TP
\fBunix\-listen:\fIPATH\fR, \fBunix\-listen:@\fINAME\fR
accept on a unix socket. Option: \fBmode=\fI0600\fR: the socket file is created with
exactly this mode (the umask is set for the bind; nothing is chmod\-ed by path);
\fBbacklog=\fIN\fR. (\fBproxy\fR, \fBreuseport\fR and \fBipv6only\fR are TCP options:
usage errors here.)
.TP
\fBudp:\fIHOST\fB:\fIPORT\fR
a connected UDP socket. As a sink, each read of the source becomes one datagram (at most
65,507 bytes: a slow writer's lines stay whole); as a source, each datagram's payload in
order of arrival, and an empty datagram is the end. Moved by userspace only (never
splice: it would cut datagrams anywhere). Option: \fBsize=\fIN\fR, the largest
datagram sent (1\-65507; a read is at most that long; not in a \fBrelay\fR of two UDP
sides, nor with \fBframe=len16\fR: each datagram goes on whole).
.TP
\fBudp\-listen:\fR[\fIHOST\fB:\fR]\fIPORT\fR
bind a UDP socket (127.0.0.1 unless \fIHOST\fR is given; announced like
\fBtcp\-listen:\fR) and receive: the first peer that sends is the only one heard
(as \fBnc \-u \-l\fR); an empty datagram, a signal or, with \fBpipe
\-\-idle\-timeout\fR, that long without a datagram ends it. Each datagram is read whole:
into a \fBudp:\fR sink with a smaller \fBsize=\fR it goes on in pieces, never cut. A
source only: as a sink it is a usage error. In \fBrelay\fR, paired with \fBudp:\fR (the other way
round too): every client gets a session, a socket of its own connected to the target,
and each datagram goes on whole both ways (answers return from the listening socket),
in userspace with \fBrecvmmsg\fR/\fBsendmmsg\fR, 32 a call; a run of datagrams of one
size goes out as one GSO send (\fBUDP_SEGMENT\fR, up to 64 datagrams: one pass down the
network stack), and the sockets ask for GRO (\fBUDP_GRO\fR), whose coalesced datagrams
go on as the same datagrams (the JSON's \fBdatagrams\fR says \fBgso\fR, \fBgso_sends\fR,
\fBgro\fR; a kernel that refuses GSO gets \fBsendmmsg\fR, \fBgso_refused\fR). A session ends after
\fB\-\-idle\-timeout\fR without a datagram (60 s by default; \fBquiet\fR in the
report, a clean end); \fB\-\-max\-conns\fR bounds the sessions (a new client's
datagrams beyond it are dropped and counted, \fBrefused\fR); \fB\-\-once\fR ends the
relay with its first session. Loss is counted, never hidden: datagrams the kernel would
not take without waiting (\fBdropped\fR) and those it dropped on arrival at the
listening socket before zerocat read them (\fBlost_on_arrival\fR).
.IP
\fBUDP with a stream\fR in \fBrelay\fR. With \fB\-\fR or \fBfd:\fIN\fR (\fBnc \-u\fR
interactively: \fBzerocat relay \- udp:\fIHOST\fB:\fIPORT\fR, \fBzerocat relay
udp\-listen:\fIPORT\fB \-\fR): each read of the stream is one datagram (at most 65,507
bytes, or \fBsize=\fR), each datagram is written to the stream whole as it comes; a
\fBudp\-listen:\fR answers the first peer that sent. With \fBtcp:\fR or
\fBtcp\-listen:\fR, the stream side takes \fBframe=len16\fR: in the stream, a 2\-byte
big\-endian length before each datagram, as DNS over TCP (RFC 1035), so UDP crosses a
TCP\-only path whole (\fBrelay udp\-listen:53 tcp:\fIHOST\fB:5353,frame=len16\fR, and at
the far end \fBrelay tcp\-listen:5353,frame=len16 udp:127.0.0.1:53\fR); a
\fBudp\-listen:\fR gives each client address a connection of its own, a
\fBtcp\-listen:\fR each connection a UDP socket of its own. A datagram is never cut: one
longer than 65,535 bytes for a \fBlen16\fR stream, or a frame longer than UDP carries
(65,507 bytes over IPv4), is dropped and counted (\fBdropped\fR); a frame cut by the
stream's end too. A TCP side without \fBframe=len16\fR, \fBframe=\fR on a datagram
side, or \fBframe=\fR without a UDP side are usage errors. Ends: the stream's EOF ends
what goes to the datagrams (UDP has nothing to say it with); an empty datagram (on a raw
stream) ends what goes to the stream; a session ends when both ways ended, after
\fB\-\-idle\-timeout\fR without a datagram either way (60 s by default; with \fB\-\fR or
\fBfd:\fIN\fR and no \fB\-\-idle\-timeout\fR, silence counts only once the stream
ended, as \fBnc \-u\fR waits for a slow typist), or on a signal. Moved in userspace, one
datagram a call.
.IP
\fBzerocat to zerocat over UDP ends by itself\fR: a \fBudp:\fR sink sends an empty
datagram when its source ended cleanly, and a zerocat receiver (\fBpipe udp\-listen:\fR,
\fBrelay udp\-listen: \-\fR) reads it as the end (\fBzerocat pipe big.iso
udp:\fIHOST\fB:5000\fR into \fBzerocat pipe udp\-listen:5000 out\fR). Another receiver
gets an empty datagram (nc writes nothing for it). Lost, like any datagram, it leaves the
receiver to its \fB\-\-idle\-timeout\fR or a signal.
.TP
\fBexec:\fIPROGRAM ARG...\fR, \fBsh:\fICOMMAND\fR
a child process: as a source its stdout, as a sink its stdin (a pipe, so the stream is
spliced). \fBexec:\fR splits words as a shell word list (quotes, backslash), no shell,
no globbing; \fBsh:\fR (\fBsystem:\fR) runs \fB/bin/sh \-c\fR \fICOMMAND\fR. Its other
stdio and its stderr are zerocat's; option \fBstderr\fR (a source only) sends its stderr
into the stream too. The first comma outside quotes starts the options. zerocat waits for
the child (interrupted, also while it waits for the child: SIGTERM, then SIGKILL after
\fB\-\-grace\fR, 2 s by default); a
child starts as a shell would start it: its stdio, with no other fd of zerocat's (an
\fBfd:\fIN\fR zerocat took is close\-on\-exec; fds zerocat was given and did not take
pass on, as under a shell), no signal blocked, every signal at its default action but
those zerocat was itself started with ignored (SIGPIPE and SIGXFSZ are the default again),
and without \fBZEROCAT_PROXY_AUTH\fR. A
child that exits non\-zero or is killed makes the run exit 1 with its status, and the
report names it (\fBpipe (child exited 0)\fR; in JSON the end's \fBchild\fR:
\fBpid\fR, \fBexit\fR, \fBsignal\fR). A program that cannot run is exit 1 before
any byte moves; an empty command or an unbalanced quote is a usage error. Option
\fBpty\fR (\fBrows=\fIN\fB,cols=\fIN\fR, 24x80 by default): the child runs on a
pseudo\-terminal of its own \(em a session of its own (setsid) whose controlling terminal it
is, as its stdin, stdout and stderr, with that window size (\fBstty size\fR) \(em for
programs that want a terminal (a shell's prompt and job control, \fBsudo\fR, \fBtop\fR):
\fBzerocat relay tcp\-listen:9000 sh:bash,pty\fR. The terminal is as a new one is (line
editing, echo, \en written as \er\en): a client in raw mode (\fB\-,raw,echo=0\fR) sees
what a terminal would show. zerocat keeps the terminal's master, and a thread between it
and pipes hands the stream on (spliced like any command's): EOF from the other side is
the terminal's end\-of\-file key (VEOF, ^D), the terminal closing (the child and what it
started are gone) is the stream's EOF. In \fBpipe\fR a source child reads zerocat's
stdin through its terminal, a sink child's terminal output goes to zerocat's stdout.
\fBrows=\fR and \fBcols=\fR without \fBpty\fR, and \fBpty\fR on an endpoint that is not
a command, are usage errors. Each end of \fBtee\fR may be one (a sink child that fails is a failed sink).
As a side of \fBrelay\fR both its stdout and stdin are the stream, inetd style: with a
listener each connection gets a child of its own, in a process group of its own so
stopping it ends what it started (SIGTERM to the group when the connection is cut at a
stop, SIGKILL \fB\-\-grace\fR later); EOF from the other side closes its stdin; a child that
fails counts its connection as failed (\fBcommand\-failed\fR). A listener that runs a
command binds 127.0.0.1 unless told otherwise, like every listener: whoever can connect
runs the command.
.TP
\fBpty:\fR[\fILINK\fR]
a new pseudo\-terminal pair (socat's \fBPTY,link=\fR): zerocat reads and writes its master,
a program opens the other side, whose name is announced on stderr (\fBzerocat: pty
/dev/pts/\fIN\fR), and \fILINK\fR, when given, is a symlink to it (an existing symlink is
replaced; removed at the end). The terminal is raw with no echo, so bytes pass as they are
both ways (a virtual serial line: \fBzerocat relay pty:/tmp/ttyV0 tcp:\fIHOST\fB:\fIPORT\fR);
zerocat holds it open for the run, so programs may open and close it in turn, and it ends
with the other side or a signal.
.TP
\fBtls:\fIHOST\fB:\fIPORT\fR, \fBtls\-listen:\fR[\fIHOST\fB:\fR]\fIPORT\fB,cert=\fIPEM\fB,key=\fIPEM\fR
TLS 1.2 and 1.3 (rustls; no older versions) over TCP. \fBtls:\fR connects (every
\fBtcp:\fR connector option but \fBproxy=\fR), then a client handshake: the server is
verified against the system's roots or \fBcafile=\fIPEM\fR, for \fIHOST\fR (an address is
verified, not sent) or \fBsni=\fINAME\fR. A certificate that is itself in \fBcafile=\fR is
trusted as that certificate, so a self\-signed one (\fBopenssl req \-x509 \-subj
/CN=\fINAME\fR, CA:TRUE by OpenSSL 3's default) works as \fBcurl \-\-cacert\fR takes it; its
name and dates are still checked (the subjectAltName's DNS and IP names, or the subject's
CN when it has none). \fBpin=sha256:\fIHEX\fR (LibreSSL \fBnc \-H\fR) takes the server's
certificate only if the SHA\-256 of its DER \(em the whole end\-entity certificate, not its
public key alone: what \fBopenssl x509 \-in \fICERT\fB.pem \-noout \-fingerprint \-sha256\fR
prints; 64 hex digits, colons allowed \(em is \fIHEX\fR; alone it is the trust (no CA is
consulted; name and dates still checked), with \fBcafile=\fR both must hold; a renewed
certificate needs a new pin. \fBverify=0\fR takes any certificate, with a
warning line (not with \fBpin=\fR); \fBcert=\fIPEM\fB,key=\fIPEM\fR is a client certificate;
\fBalpn=\fIP1\fB,\fIP2\fR offers protocols. \fBtls\-listen:\fR (\fBtls\-l:\fR) is
\fBtcp\-listen:\fR (its options, 127.0.0.1 by default) with a server handshake on every
connection, after its PROXY header with \fBproxy\fR, both within \fB\-\-connect\-timeout\fR
(5 s without it, the short end of HAProxy's \fBtimeout client\fR: a handshake is a round
trip or two); connections still greeting are at most \fB\-\-max\-conns\fR (and 1,024), half
from one address, and past that the oldest greeting is closed for the newcomer, so silent
sockets never lock a client out; \fBcafile=\fR requires client certificates from that CA (a
certificate that is itself in it, self\-signed say, is taken as that certificate, its dates
still checked). Inherited
listeners take \fB,tls,cert=,key=\fR too: \fBsystemd:\fR[\fINAME\fR] and \fBfd:\fIN\fR of a
listening socket. Keys are read once and never shown. After the handshake
the kernel takes the record layer where it can (kTLS: the \fBtls\fR ULP, see
\fB/proc/sys/net/ipv4/tcp_available_ulp\fR, and an AES\-GCM or ChaCha20 suite): the
stream then splices and sendfiles as on any socket. Where it cannot, rustls carries the
records (\fBuserspace (tls)\fR, with the kernel's errno: \fBENOENT\fR when there is no
\fBtls\fR module): in \fBrelay\fR on its event loop, records decrypted into and encrypted
from a direction's buffer (such a connection moves in userspace both ways); in \fBpipe\fR
and \fBtee\fR on a thread of the connection's own, between the socket and a socketpair
the paths work on. EOF is TLS's: a peer that closes without close_notify has cut the
stream zerocat reads from it, an error (exit 1; \fBtls\-error\fR in \fBrelay\fR); a
sink's peer (\fBpipe\fR, \fBtee\fR), which sends zerocat no stream, may close after
zerocat's close_notify without its own (RFC 5246 7.2.1; Python's ssl, many HTTP servers
do); and a stream zerocat cuts (an
error on the other side, a signal's cut) resets the TLS peer rather than send a
close_notify that would say the stream was complete. Where zerocat has read all it
wants (a WebSocket close frame came first) but the peer may still send its close_notify,
the thread waits up to 2 s for it (or a FIN) before closing: closing with bytes unread
would reset the connection and lose what the peer had not yet read. A failed or stalled handshake
is exit 1 with a sentence that says why and what to do (an unknown issuer, a wrong
name, an expired certificate, a refused client certificate, a peer that does not speak
TLS); in \fBrelay\fR that connection is closed and
counted, the others go on. Reports name version, cipher, SNI and the record layer (JSON:
the end's \fBtls\fR, below).
.TP
\fBsystemd:\fR, \fBsystemd:\fINAME\fR
socket activation (\fBsd_listen_fds\fR(3)): the listening sockets systemd passed
(\fBLISTEN_FDS\fR, from fd 3, for this process by \fBLISTEN_PID\fR), all of them or those
whose \fBFileDescriptorName=\fR is \fINAME\fR (\fBLISTEN_FDNAMES\fR). A listener like
\fBtcp\-listen:\fR (several sockets are served together); bind options come from the
\fB.socket\fR unit. The variables are unset once read. Option: \fBproxy\fR. No sockets
passed, sockets for another process, a name not passed, or a connected socket
(\fBAccept=yes\fR) are usage errors (exit 2). When the relay stops (a signal, \fB\-\-once\fR)
it closes its copy of an inherited listener (\fBsystemd:\fR, \fBfd:\fIN\fR) and never shuts
it down: the socket stays systemd's, and clients queue for the next activation. Listeners
zerocat bound itself are shut down, so new clients are refused at once.
\fBrelay \-\-exit\-idle\fR \fIDURATION\fR (systemd\-socket\-proxyd's
\fB\-\-exit\-idle\-time\fR) ends the relay, exit 0, once no connection has been open
(none greeting, no command side's child still running) for that long: it stops accepting at
that moment, so a client that connects from then on (or whose arrival epoll had just
announced) waits in the socket's backlog and is served by the next activation. It needs an
inherited listener as A (a usage error otherwise: a listener of its own would drop its
backlog) and runs one event loop. Example units:
.RS
.PP
.nf
# /etc/systemd/system/zerocat\-web.socket
[Socket]
ListenStream=0.0.0.0:80
FileDescriptorName=web
[Install]
WantedBy=sockets.target

# /etc/systemd/system/zerocat\-web.service
[Service]
ExecStart=/usr/bin/zerocat \-q relay systemd:web tcp:10.0.0.5:8080
.fi
.RE
.PP
Durations (\fB\-\-idle\-timeout\fR, \fB\-\-connect\-timeout\fR, \fB\-\-grace\fR, \fBinterval=\fR) are at most
8760h (one year); a timeout of 0 is a usage error. An option given twice takes the last
value.
.TP
\fBs3://\fIBUCKET\fB/\fIKEY\fR
An S3 object (issue 39). Credentials, region and endpoint are found as the AWS CLI finds
them: \fBAWS_ACCESS_KEY_ID\fR, \fBAWS_SECRET_ACCESS_KEY\fR and \fBAWS_SESSION_TOKEN\fR;
else the profile \fBAWS_PROFILE\fR (else \fBdefault\fR) in \fB~/.aws/credentials\fR
(\fBAWS_SHARED_CREDENTIALS_FILE\fR), then in \fB~/.aws/config\fR (\fBAWS_CONFIG_FILE\fR,
sections \fB[profile \fINAME\fB]\fR); with none, requests go unsigned (as \fBaws
\-\-no\-sign\-request\fR). A profile that gets its keys from \fBcredential_process\fR, SSO or
a role is an error that says to export them (\fBaws configure export\-credentials\fR). The
region: \fBAWS_REGION\fR, \fBAWS_DEFAULT_REGION\fR, the profile's \fBregion\fR, else
us\-east\-1. The endpoint: \fB,endpoint=\fIURL\fR, \fBAWS_ENDPOINT_URL_S3\fR,
\fBAWS_ENDPOINT_URL\fR, the profile's \fBendpoint_url\fR, else AWS; a given endpoint
(MinIO, moto, s3s) is addressed path\-style (\fB/\fIBUCKET\fB/\fIKEY\fR), AWS
virtual\-hosted; the profile's \fBs3 = addressing_style\fR overrides. An https://
endpoint is reached over TLS as \fBhttps://\fR is, with \fB,cafile=\fIPEM\fR,
\fB,verify=0\fR (insecure, said), \fB,sni=\fINAME\fR and \fB,pin=sha256:\fIHEX\fR on
the URI; a certificate not trusted is refused in words. Requests go through the \fBhttp://\fR endpoint's client,
on kept\-alive connections where the server keeps them open (see \fBHTTP\fR). Requests are signed with AWS Signature Version 4; the secret key and
session token are never shown (messages, reports), and \fBAWS_ACCESS_KEY_ID\fR,
\fBAWS_SECRET_ACCESS_KEY\fR and \fBAWS_SESSION_TOKEN\fR are removed from the environment
of \fBexec:\fR/\fBsh:\fR children.
As a source: a GET; the body is spliced by the http endpoint's pump and checked against
its Content\-Length. A body cut short (a reset, a close, \fB\-\-idle\-timeout\fR) is
asked again from the next byte with \fBRange: bytes=\fIN\fB\-\fR and \fBIf\-Match:\fR its
ETag, signed anew, into the same sink (\fB\-\-retries\fR, \fB\-\-retry\-wait\fR as for
http); an object replaced meanwhile (a 412, or a part of another ETag) is refused, exit 1,
\fBthe object changed after \fIN\fB bytes\fR: two versions never meet in a sink. The
report counts \fBresumes\fR (that continued the body), their \fBretries\fR, and
\fBfailed resume attempts\fR (reconnections that did not: refused, cut before an answer,
or all of a resume that gave up). \fBcopy \-j \fIN\fB
s3://\fIBUCKET\fB/\fIKEY\fB \fIFILE\fR fetches \fIN\fR ranges at once into the
temporary, each resumed on its own, renamed over \fIFILE\fR once whole (as for http; the
report names the object and its requests as \fBpipe\fR does);
\fBcopy \-\-resume\fR continues a partial \fIFILE\fR. As a sink: the stream
is staged from a pipe into a memfd with \fBsplice\fR, a part at a time
(\fB,part\-size=\fISIZE\fR, 8 MiB as the AWS CLI; 5 MiB to 5 GiB), and each part sent with
\fBsendfile\fR: no byte is copied through a user buffer. Up to one part is one PUT (an
empty stream, an empty object); more is a multipart upload, 4 parts sent at once while the
next is staged (memory: 5 parts), parts doubling in size every 1,000 so a stream fits in
10,000. The payload hash signed (\fBx\-amz\-content\-sha256\fR): over http the SHA\-256 of
each part and PUT (read in place from the memfd), so the server checks what arrived; over
https \fBUNSIGNED\-PAYLOAD\fR for parts and PUTs (TLS protects them, and the part is not
read again to hash it); the SHA\-256 of the body for the small requests (create, complete,
abort, lists, GET). Nothing is made until the stream ended well: on a failure,
a signal, or a source command that failed, the multipart upload is aborted
(AbortMultipartUpload) and no PUT is sent. \fBSlowDown\fR, 500 and 503 answers and a
connection cut before an answer are retried 4 times (0.2 s, doubling). S3's errors are
said in words with their code: \fBNoSuchKey\fR, \fBNoSuchBucket\fR, \fBAccessDenied\fR,
\fBSignatureDoesNotMatch\fR (naming where the credentials came from),
\fBRequestTimeTooSkewed\fR (naming the skew); exit 1. The report names the requests beside
the path: \fBpipe (s3: 5 parts, 2 other)\fR; in JSON the end's \fBrequests\fR: \fBget\fR,
\fBput\fR, \fBparts\fR, \fBlists\fR, \fBother\fR (create, complete, abort), \fBretries\fR,
\fBresumes\fR, \fBfailed_resume_attempts\fR, \fBstale_connections\fR (requests sent
again at once on a new connection: the kept\-alive one they went on had been closed by
the server while idle, nothing answered; not retries).
A comma of the key is written \fB\e,\fR.
\fBcopy \-r s3://\fIBUCKET\fB/\fIPREFIX\fB/ \fIDIR\fR copies every object under
\fIPREFIX\fB/\fR (ListObjectsV2, every page) into \fIDIR\fR, the key's rest as the path, as
\fBaws s3 cp \-\-recursive\fR does; \fBcopy \-r \fIDIR\fB s3://\fIBUCKET\fB/\fIPREFIX\fB/\fR
puts every regular file under \fIDIR\fR at \fIPREFIX\fB/\fR + its path. \fB\-j \fIN\fR
objects move at once (8). A key with an empty, \fB.\fR or \fB..\fR segment (\fBa//b\fR,
\fB../x\fR) cannot be a path under \fIDIR\fR: it is not copied, each is said, and the run
exits 1 once the others are copied; a key ending in \fB/\fR makes its directory; a file name
that is not UTF\-8 cannot be a key (the same). Its report: \fBfiles\fR, \fBbytes\fR,
\fBobjects_listed\fR, \fBrequests\fR, \fBpaths\fR, \fBfailures\fR (each \fBentry\fR and
\fBerror\fR), \fBended\fR.
.PP
\fBA listener with no HOST binds 127.0.0.1.\fR
Exposing a port is explicit: \fBtcp\-listen:0.0.0.0:8080\fR or
\fBtcp\-listen:[::]:8080\fR.
The bound address is printed on stderr as
\fBzerocat: listening on 127.0.0.1:43211\fR (port 0 picks a free port), also under
\fB\-q\fR, since scripts need it.
.PP
An argument that starts with \fIWORD\fB:\fR (a letter, then letters, digits,
\fB+ . \-\fR) is a URI, and an unknown \fIWORD\fR is a usage error: a typo such as
\fBtpc:host:80\fR never creates a file of that name.
Anything else is a file path; \fB./tcp:odd\fR and \fBfile:tcp:odd\fR name the file
\fBtcp:odd\fR.
.SS "Source address, address family and socket options"
\fBtcp:\fR, \fBtls:\fR and \fBudp:\fR take \fBbind=\fIIP\fR[\fB:\fIPORT\fR]: the
connection leaves from this address of the machine (and port; 0 or none: any), as
\fBnc \-s\fR/\fB\-p\fR. IPv6 with a port goes in brackets (\fBbind=[::1]:4000\fR). An address
of the other family than a literal \fIHOST\fR, or than \fBtcp4:\fR/\fBtcp6:\fR, is a
usage error before any fd opens; with a name, only the addresses of \fBbind=\fR's family
are tried. \fBtcp4:\fR, \fBtcp6:\fR, \fBudp4:\fR and \fBudp6:\fR (and the global
\fB\-4\fR/\fB\-6\fR, for every endpoint of the command line, listeners too) resolve a name to
that family only.
.PP
Socket options, on \fBtcp:\fR, \fBtls:\fR, \fBtcp\-listen:\fR and \fBtls\-listen:\fR
(a listener sets them on its listening socket, and every connection it accepts inherits
them), and on \fBudp:\fR those that apply to UDP: \fBkeepalive\fR[\fB=\fIIDLE\fR[\fB:\fIINTVL\fB:\fICNT\fR]]
(\fBSO_KEEPALIVE\fR; the first probe after \fIIDLE\fR seconds idle, then every \fIINTVL\fR
seconds, \fICNT\fR of them; a part left empty keeps the kernel's), \fBnodelay\fR
(\fBTCP_NODELAY\fR), \fBsndbuf=\fISIZE\fR and \fBrcvbuf=\fISIZE\fR (\fBSO_SNDBUF\fR,
\fBSO_RCVBUF\fR; \fB256k\fR; the kernel doubles the value and caps it at
\fBnet.core.wmem_max\fR/\fBrmem_max\fR), \fBbindtodevice=\fIIFACE\fR
(\fBSO_BINDTODEVICE\fR), \fBmark=\fIN\fR (\fBSO_MARK\fR, for policy routing and
nftables; needs \fBCAP_NET_ADMIN\fR), \fBtos=\fIN\fR (\fBIP_TOS\fR, or
\fBIPV6_TCLASS\fR on IPv6; \fB0x10\fR is low delay) and \fBttl=\fIN\fR (\fBIP_TTL\fR or
\fBIPV6_UNICAST_HOPS\fR). Each is set on the socket before its bind, connect or listen.
One the kernel refuses is an error that names it, never skipped: \fBoption 'mark=1': the
kernel refused it (SO_MARK needs CAP_NET_ADMIN): Operation not permitted (EPERM)\fR, exit
1 (\fBrelay\fR tries them on a socket at its start, so it says so before it serves).
\fB\-v\fR echoes what was set: \fBzerocat: tcp:...: socket options set: bind=127.0.0.2,
nodelay\fR.
.SS "Allow and deny"
\fBtcp\-listen:\fR, \fBtls\-listen:\fR and \fBudp\-listen:\fR take
\fBallow=\fICIDR\fR[\fB;\fICIDR\fR...], \fBdeny=\fICIDR\fR[\fB;\fICIDR\fR...]
and \fBallow\-file=\fIPATH\fR (one CIDR a line; blank lines and \fB#\fR comments
skipped), as ncat's \fB\-\-allow\fR/\fB\-\-deny\fR/\fB\-\-allowfile\fR and socat's
\fBrange=\fR. A CIDR is \fB10.0.0.0/8\fR, \fBfd00::/8\fR, or an address alone (/32,
/128); a dual\-stack listener's IPv4 clients (\fB::ffff:a.b.c.d\fR) match IPv4 networks.
A client in a \fBdeny=\fR network is refused; with any \fBallow=\fR or
\fBallow\-file=\fR, so is a client in none of their networks. The address checked is
the one the PROXY header carried on a \fBproxy\fR listener (the real client's, not
the load balancer's), else the peer's. A refused client is reset (\fBRST\fR) before any
byte of it is read, on a TLS listener before the handshake; it is said on stderr
(\fBrefused the connection from 127.0.0.2:40000: 127.0.0.2 is in none of
allow=127.0.0.1/32\fR), counted \fBrefused\fR in the relay's report and listed in
\fB\-\-log\fR with \fBended\fR \fBrefused\fR; \fBpipe\fR and \fBtee\fR (once or
\fB\-\-keep\-open\fR) count it in their report (\fB; 1 connection refused by allow/deny\fR
on the text line, \fBrefused\fR in JSON) and wait for the next client. A \fBudp\-listen:\fR drops the datagrams of a refused client (\fBpipe\fR says each;
both count them, \fB; 3 datagrams refused by allow/deny\fR). A CIDR that does not parse, or an \fBallow\-file=\fR that
cannot be read or holds none, is a usage error (exit 2) before any fd opens.
.SS "A listener's child's environment"
An \fBexec:\fR or \fBsh:\fR side of \fBrelay\fR whose other side is a listener gets,
for each connection, in its environment (inetd's habit; ncat's \fBNCAT_REMOTE_ADDR\fR,
socat's \fBSOCAT_PEERADDR\fR): \fBZEROCAT_PEER_ADDR\fR and \fBZEROCAT_PEER_PORT\fR (the
client; with \fBproxy\fR, the one its PROXY header named), \fBZEROCAT_LOCAL_ADDR\fR and
\fBZEROCAT_LOCAL_PORT\fR (the address it connected to), \fBZEROCAT_PROTO\fR
(\fBtcp\fR, \fBtls\fR, \fBunix\fR) and, when a TLS client presented a certificate
(\fBcafile=\fR on the listener), \fBZEROCAT_TLS_CLIENT_SUBJECT\fR
(\fBCN=client, O=Example\fR). IPv4 clients of a dual\-stack listener are written as
IPv4 addresses. Variables of these names zerocat itself inherited are removed first.
\fBpipe\fR's and \fBtee\fR's \fBexec:\fR/\fBsh:\fR ends get the same variables when
the other end is a TCP, unix or TLS socket, accepted or connected (not a WebSocket or
datagram socket): of a connector, \fBZEROCAT_PEER_*\fR name the server and
\fBZEROCAT_LOCAL_*\fR the address zerocat left from. A command source whose sink is such
a socket is started once the sink is connected or accepted (\fBnc \-e\fR's order), so
\fBzerocat pipe sh:handler tcp\-listen:9000\fR serves one client as
\fBnc \-l \-e\fR does. \fBtee\fR's command sinks learn its source socket (not with
\fB\-\-keep\-open\fR, whose sinks start before any connection); a command source
of \fBtee\fR starts first and learns nothing.
.SH PATHS
Each fd is classified with \fBfstat\fR(2): regular file, pipe or FIFO, socket, terminal,
other character device.
The first path the pair allows is tried; the next one takes over only when the kernel
refuses a path \fIbefore any byte moved\fR (ENOSYS, EINVAL, EXDEV, EOPNOTSUPP, EPERM,
EBADF, ETXTBSY, EACCES, ENOTTY, ESPIPE); after that, an error is an error.
EIO, ENOSPC and EDQUOT never cause a fallback.
.TP
file \(-> file
\fBcopy_file_range\fR, then \fBsplice\fR through a pipe, then \fBuserspace\fR
(\fBcopy\fR tries a \fBreflink\fR first).
.TP
file \(-> pipe
\fBsplice\fR, then \fBuserspace\fR.
.TP
file \(-> socket
\fBsendfile\fR, then \fBsplice\fR through a pipe, then \fBuserspace\fR.
.TP
pipe \(-> anything, anything \(-> pipe
\fBsplice\fR, then \fBuserspace\fR.
.TP
socket \(-> socket or file
\fBsplice\fR through zerocat's own pipe, then \fBuserspace\fR.
.TP
terminal, other, an O_APPEND sink the kernel refuses
\fBuserspace\fR (read and write through one buffer).
.TP
relay, each direction
its own pipe (\fBsplice\fR in, \fBsplice\fR out) or a 256 KiB buffer (\fBread\fR,
\fBwrite\fR). Under auto a direction from a socket starts with the buffer (a request
or an answer costs one read and one write) and moves to \fBsplice\fR at its first read
of 64 KiB or more (a bulk stream, which splice moves for less CPU); a socket that sends
tiny segments (about 2 KiB or less, seen as pipe buffers that fill one segment each)
goes back to the buffer for good, which coalesces them. A direction from anything else
starts with \fBsplice\fR.
A pipe starts at 64 KiB; one that a splice fills grows to 1 MiB (or
\fBpipe\-max\-size\fR if lower), for fewer and larger splices; a TCP socket of the
relay's own that such a pipe feeds then holds at most that much unsent
(\fBTCP_NOTSENT_LOWAT\fR), the rest waiting in the pipe; a cut lifts it first, so the
last flush hands the socket all it takes.
Memory is bounded: the pipes of all connections hold at most 32 MiB (a pipe is given back
when its direction goes idle or its connection ends, and only an empty one is reused; a
direction that finds none moves through a buffer, or under \fB\-\-via splice\fR its
connection ends with \fBno pipe for A \-> B\fR), and the shared buffers at most 16 MiB
(64 of 256 KiB). Clients that stop reading can hold all of that; then every other
direction goes on with a 16 KiB buffer of its own (HAProxy's \fBtune.bufsize\fR), freed
when it empties, so a connection degrades, never the relay: no direction waits for memory
(at most 32 KiB more per connection, which \fB\-\-max\-conns\fR bounds). The first time
in a stretch, stderr says so (\fBthe buffer budget (16.0 MiB) is held by directions whose
sinks are not reading\fR). \fB\-\-idle\-timeout\fR cuts a client that never reads.
\fB\-\-max\-conns\fR defaults to what the open\-file limit holds (the soft limit is raised
to the hard one first), so idle clients wait in the listen backlog rather than run the
relay out of fds; it bounds the whole process, whatever \fB\-\-workers\fR, and the
connections a TLS or \fBproxy\fR listener has still greeting. Out of fds all the same,
such a listener closes its oldest greeting, or accepts one client and closes it at once
from a descriptor kept in reserve, rather than leave the backlog unread.
With a listener, \fB\-\-workers\fR \fIN\fR event loops (threads; default: the CPUs the
process may run on, but one below 4 CPUs, where a second loop competes with the
relay's own backends and clients for the same CPUs) share it: a new connection wakes one loop that is waiting
(\fBEPOLLEXCLUSIVE\fR), so an idle loop takes most of a light load; on a TLS or
\fBproxy\fR listener every loop takes PROXY headers and handshakes (the handshake's
work is done outside the listener's lock). The budgets above
are split between them, and the report sums them.
Inherited stdin, stdout and \fBfd:\fIN\fR get their file status flags
(\fBO_NONBLOCK\fR) back at the end, also on SIGHUP, SIGQUIT and a crash.
.TP
one \(-> many (tee)
\fBsplice\fR in, \fBtee\fR(2) to the sinks' pipes, \fBsplice\fR out; else a
\fBuserspace\fR fan\-out.
.PP
\fB\-\-via\fR \fIPATH\fR forces one path, with no fallback: a path the fds cannot take
is an error before any byte moves.
Bytes already in an intermediate pipe are always delivered to the sink, also when the
run ends on an error or a signal.
A first \fBcopy_file_range\fR that returns 0 is not trusted as the end of the file
(procfs, sysfs, FUSE): the next path takes over.
.SH REPORT
At the end, one line on stderr (none under \fB\-q\fR). What each command prints:
.PP
.nf
.RS
zerocat: 1.00 GiB in 412 ms (2.43 GiB/s) file \-> pipe via splice
zerocat: 12.0 MiB in 21.3 ms (563 MiB/s) file \-> file via copy_file_range \-> splice (EXDEV)
zerocat: copied 6 files, 6.00 MiB in 6.82 ms (880 MiB/s) via copy_file_range (reflink unsupported here); 3 directories
zerocat: 6.00 MiB in 1.85 ms (3.18 GiB/s) file \-> 2 sinks via tee: 'file:copy.iso' file via splice, '\-' pipe via tee
.RE
.fi
.PP
The first two are \fBpipe\fR (the second across filesystems: ext4 to tmpfs), then
\fBcopy \-r\fR (on ext4, which cannot clone) and \fBtee big.iso copy.iso \-\fR.
Sizes use binary units (KiB, MiB, GiB) and durations ms, s, min; the route lists the
paths in the order they ran, each fallback's errno after the path that took over, and
\fB(refused: \fIERRNO\fB)\fR when a forced path was refused. A reflink the filesystem does
not do (ext4, tmpfs: the ordinary case) is said in words, \fB(reflink unsupported
here)\fR, not as an errno; JSON keeps that fallback with its errno. Every message names
an errno by its symbol, \fBNo such file or directory (ENOENT)\fR, also in JSON and
\fB\-\-log\fR. A run stopped by SIGINT/SIGTERM ends its line with \fB; interrupted\fR.
\fBcopy\fR adds what is not zero among directories, symlinks, special files, holes
skipped, bytes resumed, entries skipped (\fB\-n\fR) and failed; with \fB\-v\fR it prints one
line per entry first (\fB'tree/a/f1' \-> 'backup/a/f1': 1.00 MiB via copy_file_range
(reflink unsupported here)\fR).
\fBtee\fR names each sink with its route, its byte count when it got fewer bytes than
the others, and its error in brackets.
.PP
The rate of \fBpipe\fR and \fBtee\fR is over the time bytes were moving: from the
request that delivered the first byte to the last delivery. When the run mostly waited
(the rest of the wall time at least a second and a tenth of it: a peer that closes
minutes after its last byte, a source that starts late), the line says so and gives that
time beside the wall time:
\fBzerocat: 20.0 MiB in 10 min 18 s (33.1 MiB/s while moving, 605 ms) socket \-> file via
splice\fR. A pause between bytes is moving time.
.PP
\fB\-\-stats json\fR prints one JSON object instead, with exact integers: always, also
under \fB\-q\fR (which silences the text line only), and always the last thing on stderr
(after any error message), so a script can parse the last line; a run that failed before
it could make a report prints \fB{"command":..,"bytes":0,"ended":"error","error":..}\fR.
\fB\-\-stats\-fd\fR \fIN\fR writes the report to the inherited fd \fIN\fR instead.
Its field names are stable. Every command has:
.TP
\fBcommand\fR
\fBpipe\fR, \fBtee\fR, \fBcopy\fR or \fBrelay\fR.
.TP
\fBbytes\fR
bytes delivered (written, not read); for \fBtee\fR, the bytes taken from the source.
.TP
\fBseconds\fR
wall time of the transfer, a decimal number.
.TP
\fBmoving_seconds\fR
\fBpipe\fR and \fBtee\fR: of \fBseconds\fR, the time bytes were moving (from the
request that delivered the first byte to the last delivery; 0 when none moved); the text
line's rate is over it when the run mostly waited.
.TP
\fBsrc\fR, \fBdst\fR
objects: \fBuri\fR (the endpoint as given) and \fBkind\fR (\fBfile\fR, \fBpipe\fR,
\fBsocket\fR, \fBtty\fR, \fBchardev\fR, \fBdir\fR, \fBother\fR).
\fBcopy\fR: \fBsrc\fR is an array of them, one per source, and \fBkind\fR is \fBfile\fR,
\fBdir\fR or \fBsymlink\fR. \fBtee\fR has no \fBdst\fR: see \fBsinks\fR. An endpoint
with \fBmptcp\fR adds \fBmptcp\fR: \fBactive\fR (true when the connection speaks MPTCP)
and \fBfallback\fR (null, the errno that refused an MPTCP socket, or \fBpeer\fR: the
peer did not offer MPTCP). A TLS endpoint adds \fBtls\fR: \fBversion\fR, \fBcipher\fR,
\fBsni\fR, \fBalpn\fR, \fBpath\fR (\fBktls\fR or \fBuserspace\fR), \fBktls\fR (true when
the kernel carries the records) and \fBfallback\fR (null, or the errno of the kernel's
refusal); \fBrelay\fR's connections and \fB\-\-log\fR lines carry it per side
(\fB"tls":{"a":{...}}\fR).
.TP
\fBpaths\fR
array, in the order the paths ran: \fBpath\fR (\fBreflink\fR, \fBcopy_file_range\fR,
\fBsendfile\fR, \fBsplice\fR, \fBtee\fR, \fBuserspace\fR) and \fBbytes\fR (what that
path delivered). A path refused before it moved a byte is listed with 0.
.TP
\fBfallbacks\fR
array: \fBfrom\fR, \fBto\fR (null when a forced path was refused), \fBerrno\fR (its
name, as \fBEXDEV\fR, or \fBreturned 0\fR for a first copy_file_range that returned 0,
or \fBreturned 0 before the end\fR for a later one short of the source's size: a short
copy, as FUSE and CIFS make, that the next path completes from where it stopped)
and \fBreason\fR (its text).
.TP
\fBended\fR
\fBeof\fR, \fBerror\fR or \fBsignal\fR.
.TP
\fBerror\fR
the error message, or null.
.PP
\fBcopy\fR adds, for the whole run:
.TP
\fBfiles\fR, \fBdirs\fR, \fBsymlinks\fR, \fBspecials\fR
entries copied of each kind (\fBspecials\fR: FIFOs and device nodes, with
\fB\-\-special\fR). Without \fB\-r\fR a FIFO, pipe or device operand is not a special
entry: it is read to its end into a regular file (\fBfiles\fR), as \fBcp\fR does.
.TP
\fBskipped\fR
destinations left alone under \fB\-n\fR or \fB\-\-update\fR.
.TP
\fBfailed\fR
entries that could not be copied (the run then ends with \fBerror\fR and exit status 1).
.TP
\fBdiscarded_bytes\fR
under \fB\-\-atomic\fR, bytes written to the temporaries of files that failed and were
thrown away; \fBbytes\fR counts only what reached a destination.
.TP
\fBholes\fR
bytes of holes skipped rather than written (and with \fB\-\-sparse=always\fR, zero
blocks).
.TP
\fBresumed\fR
bytes of destinations kept by \fB\-\-resume\fR.
.TP
\fBresume_check_seconds\fR
seconds \fB\-\-resume\fR spent comparing destinations with their sources (0 without it).
.TP
\fBverified_bytes\fR, \fBverify_seconds\fR
bytes \fB\-\-verify\fR read back and found equal, and the seconds it spent (0 without it).
.TP
\fBentries\fR
array, one object per entry in the order each was done (a directory after what it
holds; always, also without \fB\-v\fR):
\fBsrc\fR and \fBdst\fR (paths, as strings), \fBkind\fR (\fBfile\fR, \fBdir\fR,
\fBsymlink\fR, \fBfifo\fR, \fBdevice\fR, \fBsocket\fR, or \fBentry\fR when it could not
even be examined), \fBbytes\fR, \fBholes\fR, \fBresumed\fR, \fBskipped\fR (true or
false), \fBresume_check_seconds\fR (null when no destination was compared),
\fBverified_bytes\fR, \fBverify_seconds\fR (null when the file was not verified), \fBpaths\fR,
\fBfallbacks\fR, \fBhard_link_to\fR (under \fB\-\-preserve\fR in a tree, a file linked to
another in the source is made a hard link to that one's copy: its path; else null) and
\fBerror\fR (the message, or null).
.PP
\fBtee\fR adds:
.TP
\fBsinks\fR
array, one object per sink in the order given: \fBuri\fR, \fBkind\fR, \fBbytes\fR (what
that sink got), \fBpaths\fR (\fBtee\fR, \fBsplice\fR for the sink fed straight out of
the source's pipe, or \fBuserspace\fR), \fBfallbacks\fR, \fBended\fR and \fBerror\fR.
A sink stopped by another one's failure ends with \fBerror\fR
\fB"stopped: \fImessage\fB"\fR.
.PP
\fBpipe\fR and \fBtee\fR add, where an end listens:
.TP
\fBrefused\fR
clients its \fBallow=\fR/\fBdeny=\fR list refused (closed before a byte was read), 0
when none; the text line says \fB; N connections refused by allow/deny\fR when some were.
.TP
\fBconnections\fR, \fBconnections_cut\fR
\fB\-\-keep\-open\fR: the connections taken one after another, and how many of them were
cut (a reset, a TLS stream without close_notify).
.PP
\fBrelay\fR has \fBa\fR and \fBb\fR (each \fBuri\fR) instead of \fBsrc\fR and
\fBdst\fR; \fBbytes\fR is both directions together, and \fBpaths\fR and
\fBfallbacks\fR add up every connection. It adds:
.TP
\fBbytes_a_to_b\fR, \fBbytes_b_to_a\fR
bytes delivered each way, over all connections.
.TP
\fBfailed\fR
connections that did not end with \fBeof\fR.
.TP
\fBrefused\fR
connections the listener's \fBallow=\fR/\fBdeny=\fR refused (each also listed, ended
\fBrefused\fR, and not counted as failed); a datagram relay: datagrams of refused
clients, dropped.
.TP
\fBconnections\fR
array, one object per connection in the order they ended, the last 256 of them (a
long\-running relay keeps no more; the totals above count every connection): \fBid\fR, \fBpeer\fR (the
client's address), \fBseconds\fR, \fBended\fR (\fBeof\fR, \fBreset\fR,
\fBerror\fR, \fBidle\-timeout\fR, \fBconnect\-failed\fR, \fBcommand\-failed\fR,
\fBtls\-error\fR, \fBsignal\fR, \fBno\-upstream\fR (several upstreams, none up), \fBnot\-served\fR: accepted but still greeting when the
relay stopped accepting, closed, not counted as failed, or \fBrefused\fR: by the
listener's \fBallow=\fR/\fBdeny=\fR, closed before any byte was read),
\fBerror\fR, and \fBa_to_b\fR and \fBb_to_a\fR, one per direction, each with
\fBbytes\fR, \fBpaths\fR, \fBfallbacks\fR, \fBswitches\fR (how often the adaptive
choice moved between \fBsplice\fR and \fBuserspace\fR), \fBundelivered\fR (bytes
taken from the source that could not be written out when the connection was cut: 0 on
a clean end; when the grace of a stop signal ends, also what a TCP sink had still not
sent after a last 100 ms to drain, since the reset drops it; for a TLS sink whose records
rustls carries, bytes count as delivered once every record carrying them is on the socket,
and those in records not all sent are undelivered), \fBended\fR and \fBerror\fR;
and \fBmptcp\fR when a side asked for it: \fBa\fR, \fBb\fR, each as \fBsrc\fR's.
.TP
\fBconnections_omitted\fR
connections that ended before those listed, counted in the totals but not listed.
.TP
\fBupstreams\fR
with several upstreams only: \fBbalance\fR, \fBno_upstream\fR (clients closed because
none was up) and \fBlist\fR, one object per upstream in the order given: \fBuri\fR,
\fBserved\fR (connections that ran on it), \fBfailed\fR (tries that failed before a
byte moved, each gone on to the next upstream), \fBopen\fR and \fBdown\fR (skipped now).
Each connection then also has \fBupstream\fR (the address) and \fBupstream_uri\fR
(which of the upstreams it got).
.TP
\fBlog_error\fR
present only when \fB\-\-log\fR stopped on a write error, or lines were not written
because the log did not keep up: its text, with the count of such lines.
.SH SEVERAL UPSTREAMS
\fBrelay\fR \fILISTENER B1 B2\fR ... gives each connection one upstream (\fBtcp:\fR,
\fBtls:\fR, \fBunix:\fR, \fBexec:\fR, \fBsh:\fR; with \fBudp\-listen:\fR, \fBudp:\fR,
picked once per session), chosen by \fB\-\-balance\fR: \fBfailover\fR (default: the
first that is up, as realm's and HAProxy's backup servers), \fBround\-robin\fR,
\fBleast\-conn\fR (fewest open, over every worker), \fBsource\-hash\fR (by the client's
IP address, the PROXY header's if it carried one: a client keeps its upstream while it
is up; a usage error with a listener whose clients have none, such as \fBunix\-listen:\fR).
A try that fails before any byte moved \(em connection refused, \fB\-\-connect\-timeout\fR
(an upstream that drops SYNs), a TLS handshake that fails, a proxy that refuses, or an
upstream that accepts and resets before it sent a byte and before the relay wrote it one
\(em goes on to the next upstream, with the client's bytes read so far kept for it. Once a
byte moved either way, a failure is that connection's failure, never a retry: nothing is
sent twice. An upstream that failed is skipped for \fB\-\-down\-for\fR (default 10 s,
nginx's \fBfail_timeout\fR; \fB0\fR: never skipped). \fB\-\-check\-interval\fR
\fIDURATION\fR probes each upstream that often from a thread of its own (a connect, and for
\fBtls:\fR a handshake, within \fB\-\-connect\-timeout\fR or the interval): a failed
probe marks it down, an answered one up again. When no upstream is left (all down, or all
failed this connection), the client is closed and the connection ends \fBno\-upstream\fR.
The report (\fBupstreams\fR, and per connection \fBupstream_uri\fR), the \fB\-\-log\fR
lines, \fB\-v\fR and SIGUSR1's totals name each connection's upstream and count, per
upstream, the connections it served and the tries that failed.
.SH RELAY LOG
In text mode (without \fB\-v\fR, which prints a line for every connection) \fBrelay\fR
names each connection that did not end cleanly, one line each as \fB\-v\fR prints it
(a direction with undelivered bytes says \fB(\fR\fIsize\fR\fB undelivered)\fR), at
most five a second (the report's count has every one; \fB\-\-log\fR lists each); a cut at
SIGINT/SIGTERM is the run's end, not a failure line.
.PP
\fBrelay \-\-log\fR \fIPATH\fR writes one JSON object per line into \fIPATH\fR
(opened for appending and created 0644; a FIFO waits for its reader) or, with
\fB\-\fR, on stderr. Each line is written with one \fBwrite\fR(2) by a thread of its
own, so the relay never waits for its log: when the log does not keep up (a FIFO whose
reader stalls, a slow disk) up to 16,384 lines wait, and further lines are dropped,
said once on stderr and counted in the report's \fBlog_error\fR; at the end the log gets
one second to write what waits. The first line is written at start, so a log that cannot
be written (\fB/dev/full\fR, a full disk) is an error before anything is served; a write
that fails later stops the log, said once on stderr and as \fBlog_error\fR in the
report. SIGHUP reopens the file (see SIGNALS). The field names are stable:
.TP
\fB{"event":"start"}\fR
\fBtime\fR, \fBevent\fR, \fBa\fR and \fBb\fR (the URIs), \fBpid\fR.
.TP
\fB{"event":"connection"}\fR
one per connection, when it ended: \fBtime\fR (UTC, RFC 3339 to the millisecond,
\fB2026\-11\-23T16:34:40.123Z\fR), \fBevent\fR, \fBid\fR (as in the report),
\fBworker\fR (the event loop that served it, from 0), \fBclient\fR (the accepted
peer's address; without a listener, side A), \fBupstream\fR (the address the relay
connected to, or the URI when it never connected; with several upstreams also
\fBupstream_uri\fR, the one picked), \fBseconds\fR, \fBended\fR and
\fBerror\fR (as in the report: \fBeof\fR, \fBreset\fR, \fBerror\fR,
\fBidle\-timeout\fR, \fBconnect\-failed\fR, \fBcommand\-failed\fR, \fBtls\-error\fR,
\fBsignal\fR, \fBnot\-served\fR, \fBno\-upstream\fR, \fBrefused\fR; the
error text or null),
\fBa_to_b\fR and \fBb_to_a\fR with \fBbytes\fR, \fBpaths\fR (each \fBpath\fR and
\fBbytes\fR), \fBfallbacks\fR (each \fBfrom\fR, \fBto\fR, \fBerrno\fR,
\fBreason\fR), \fBswitches\fR, \fBundelivered\fR, \fBended\fR and \fBerror\fR;
\fBmptcp\fR when a side asked for it, and \fBchild\fR when a side is a command
(\fB{"b":{"pid":..,"exit":0,"signal":null}}\fR: the connection is logged once its
child has exited).
Readers should ignore fields they do not know: new ones may be added.
.SH DUMP
\fB\-\-dump\fR \fIFILE\fR (socat's \fB\-v\fR/\fB\-x\fR, ncat's \fB\-o\fR/\fB\-x\fR) writes
every byte \fBrelay\fR, \fBpipe\fR or \fBtee\fR moves into \fIFILE\fR (created or
truncated), per connection and direction, in the order each direction delivered it
(\fBpipe\fR and \fBtee\fR: their one stream is connection 1, \fBa>b\fR; each
connection of \fBpipe\fR or \fBtee \-\-keep\-open\fR one of its own). A directory or an unknown
\fB\-\-dump\-format\fR is a usage error before anything listens, and so is a forced
\fB\-\-via copy_file_range\fR or \fBsendfile\fR (no pipe or buffer of zerocat's
holds those bytes). The transfer's own path stays splice: a direction that splices
through a pipe copies the pipe's head into the dump with \fBtee\fR(2) before splicing
it out (a head already copied is never copied again; \fBpipe\fR tees the source's pipe
when the source is one, else goes through a pipe of its own, so a file's
copy_file_range or sendfile becomes splice; \fBtee\fR tees the source's pipe before it
is consumed); one on the userspace path writes the same bytes. The report's JSON has
\fBdump\fR: \fBpath\fR, \fBformat\fR, \fBbytes\fR (in the file), \fBmissed\fR,
\fBteed\fR and \fBwritten\fR (how the copied bytes got there), \fBerror\fR. The dump has a buffer of its
own (a pipe as large as \fIpipe\-max\-size\fR allows) and a thread that formats it in
the idle scheduling class (\fBSCHED_IDLE\fR: it runs only on a core no other thread
wants, so it takes no core the transfer needs and on a busy machine falls behind; once
the transfer is over, in the normal class, so what is left does not hold the exit. Leaving
the idle class takes \fBCAP_SYS_NICE\fR or an \fBRLIMIT_NICE\fR that allows zerocat's
nice: without either, or where \fBSCHED_IDLE\fR is refused, the thread runs at nice 19
and the dump's line says so). When the buffer is full and the transfer passes more than
1 GiB/s, far more than the thread can format (~300 MiB/s), the thread stands aside until
the transfer slows below that or pauses, so that formatting costs a bulk transfer
nothing: of a 1 GiB relay at full speed the dump holds what its buffer took first and
in the pauses. The file gets what
was formatted whenever the thread has caught up, so \fBtail \-f\fR \fIFILE\fR shows each
exchange as it passes. When that buffer is full the bytes that did not fit are \fImissed\fR, marked in the dump and
counted on the line \fBdump: \fR\fIsize\fR\fB into \fR\fIFILE\fR\fB, \fR\fIsize\fR\fB
missed, fed by tee(2) from the transfer's pipe\fR (or \fBwrites from the transfer's
buffer\fR), rather than making the transfer wait. \fB\-\-dump\-format\fR:
.TP
\fBhex\fR (default)
a line per record, \fB>\fR (A to B) or \fB<\fR (B to A), \fItime\fR (UTC, to the
microsecond), \fBconn\fR \fIid\fR (as in the report), \fBa>b\fR or \fBb>a\fR,
\fBoffset\fR \fIN\fR (bytes of that direction before it), \fBlength\fR \fIN\fR; then
\fBhexdump \-C\fR lines whose offsets are the stream's. \fB# \fR\fItime\fR\fB conn
\fR\fIid\fR\fB open \fR\fIA\fR\fB > \fR\fIB\fR names the peers' addresses (\fB\-\fR where
not IP), \fB# ... a>b end at \fR\fIN\fR a direction's EOF, \fB! ... offset \fR\fIN\fR\fB
missed \fR\fIM\fR bytes the dump missed.
.TP
\fBtext\fR
the same lines, the bytes as text: printable ASCII as is, \fB\e\e\fR, \fB\er\fR,
\fB\et\fR, \fB\en\fR (followed by a line break that is not a byte) and \fB\ex\fR\fIHH\fR
(also for a \fB>\fR, \fB<\fR, \fB#\fR or \fB!\fR that starts a line, so no line of bytes
reads as a record's head).
.TP
\fBpcap\fR
a pcap file (LINKTYPE_RAW) Wireshark and tcpdump read: each connection a TCP
conversation between its two peers' real addresses and ports (A's client, B's server;
IPv6 with a mapped address when the families differ; 127.0.0.1/127.0.0.2 where a side
is not IP), opened with a SYN, SYN\-ACK, ACK, its bytes in segments of at most 65,000
bytes whose sequence numbers are the stream's offsets + 1, and a FIN at a direction's
EOF. Missed bytes are a jump in the sequence numbers (Wireshark: "previous segment not
captured"). TCP checksums are 0.
.SH WEBSOCKET
\fBws://\fR\fIHOST\fR[\fB:\fR\fIPORT\fR]\fB/\fR\fIPATH\fR (port 80) and \fBwss://\fR (port 443,
inside TLS, with the options of \fBtls:\fR) are RFC 6455 clients; \fBws\-listen:\fR
[\fIHOST\fR\fB:\fR]\fIPORT\fR[\fB/\fR\fIPATH\fR] serves the upgrade (for \fIPATH\fR only,
when given; \fBcert=\fR and \fBkey=\fR make it wss). A path is required after \fBws://\fR
(usage error otherwise). The stream crosses as binary frames: each read of the other side
one frame, masked from a client; a server's frames are unmasked, their payloads spliced
from the connection's socketpair through a pipe between headers written by hand, and a
client splices the payloads it receives from the socket. A ping is answered with a pong.
The peer's close frame is that direction's EOF; zerocat's EOF is its close frame (1000),
and the other direction goes on until its own close (zerocat to zerocat, a half\-close
crosses, and with websocat; browsers and Python's websockets end both ways at the first
close frame). A frame the peer must not send closes that connection, said on stderr
(\fBzerocat: ws: \fR\fIpeer\fR\fB sent \fR\fIwhat\fR\fB: closed with \fR\fIcode\fR): a
length with its top bit set (2^63 and more), an unmasked frame from a client, a
fragmented or oversized control frame, an unknown opcode or reserved bit: 1002; a text
message that is not UTF\-8: 1007. Other connections go on. A relay with a WebSocket end
has \fBwebsocket\fR in its JSON report: \fBspliced\fR and \fBcopied\fR payload bytes,
\fBclosed_1002\fR and \fBclosed_1007\fR (connections closed for such a frame) and
\fBpings\fR (answered). Each WebSocket connection runs
in two threads of its own between the network and a socketpair the engine or the relay
sees as a unix socket (a relay's report shows that socket's path).
.SH PROGRESS AND RATE LIMIT
A progress bar is drawn on stderr when stderr is a terminal, the data does not go to
that same terminal (zerocat as \fBcat\fR: no bar between the data's lines), and zerocat
is in the terminal's foreground process group (as \fBpv\fR: a background job does not
draw over the shell); \fB\-\-progress\fR forces it, \fB\-q\fR and \fB\-\-no\-progress\fR
hide it. When stderr is not a terminal (a log, a pipe), \fB\-\-progress\fR prints plain
lines instead, twice a second, the SIGUSR1 line (\fBzerocat: 1.25 MiB in 601 ms (2.08
MiB/s), 62% of 2.00 MiB\fR), with no carriage return or escape. It shows bytes delivered, the rate (a recent one: an exponentially weighted
estimate over about 15 s, not the average since the start), elapsed time, and the
percentage and ETA when the size is known (a file source, or \fB\-\-size\fR); the bar
itself takes what the terminal's width leaves, so the line never wraps. In a narrow
terminal fields are dropped to fit, as \fBpv\fR does: the elapsed time first, then the
total, the bar, the ETA and the rate; the percentage and the bytes stay. The line stops
three columns short of the terminal's width, so the \fB^C\fR the terminal echoes on
Ctrl\-C does not wrap it, and the bar is cleared before the report on every ending (the
end, an error, SIGINT or SIGTERM).
Bytes count when the sink took them; for a pipe sink, what still sits in the pipe is not
counted yet.
\fBcopy\fR counts bytes and files, \fB12/40 files\fR: the totals come from a walk of
the sources on a thread of its own, which the copy does not wait for (holes of sparse
files are not counted).
\fBtee\fR counts the bytes delivered to every sink, that is to the slowest one.
The bar is cleared before the report line.
.PP
\fB\-\-limit\fR \fIRATE\fR holds each transfer to \fIRATE\fR bytes per second
(\fB500k\fR, \fB10M\fR, \fB1.5G\fR; binary units as in \fBpv \-L\fR).
It paces the length each kernel call is asked for, so splice, sendfile, copy_file_range
and tee stay the path.
In \fBrelay\fR, \fB\-\-limit\fR holds each direction of each connection to \fIRATE\fR,
and \fB\-\-limit\-total\fR \fIRATE\fR all connections together, each way (over every
worker); both may be given. A token bucket says how long the next read or splice from a
direction's source may be (at most an eighth of the rate, as above), on the splice path as
on the userspace one; a direction out of tokens stops reading and a timer on the event loop
wakes it when 64 KiB (or an eighth of the rate, if less) came back: no thread sleeps. A
paced direction whose source resets passes the reset on at once, not after the bytes
queued before it, and an EOF with nothing before it is read at once. A UDP relay is not
paced: \fB\-\-limit\fR there is a usage error (exit 2).
A \fBcopy\fR is one transfer: the rate is for all its files together (a reflink moves
no data and is not held back, nor are the zero blocks \fB\-\-sparse=always\fR seeks over).
\fBtee\fR paces what it takes from the source, so every sink gets \fIRATE\fR.
.PP
\fBtee\fR's first operand is the source. GNU \fBtee\fR's form, \fBprintf x | zerocat tee t1 t2\fR,
would read \fBt1\fR into \fBt2\fR and ignore stdin, so when the source is a file and stdin is
a pipe or a file it is a usage error (exit 2, no file touched) that shows the spelling with
GNU's meaning: \fBzerocat tee \- t1 t2 \-\fR.
.SH TEE: WHEN A SINK FAILS
By default (\fB\-\-on\-error=fail\fR) the first sink that fails stops the whole run:
what is already in zerocat's pipes is delivered, the error names the sink, exit status 1;
stdout's reader going away is the quiet 141 of GNU \fBtee\fR killed by SIGPIPE. (GNU's
default keeps feeding the other files after a file fails; its exit status, 1, is the same:
\fB\-\-on\-error=gnu\fR is that default, a failing file dropped and the others fed, exit
1 at the end, and any reader that went away ending the run quietly with 141. As GNU's,
it says each failed output on a line of its own, and one that cannot be opened at once:
also a run that then ends quietly with 141 has said it.)
\fB\-i\fR (\fB\-\-ignore\-interrupts\fR, GNU's) ignores SIGINT: a Ctrl\-C meant for the
command feeding the pipe does not cut the copy short; SIGTERM still stops it.
\fB\-\-output\-error\fR[\fB=\fIMODE\fR] takes GNU \fBtee\fR's modes, with its exit
statuses; a "reader that went away" is a sink failing with EPIPE (a pipe or socket whose
reader closed):
.TP
\fBwarn\fR (also \fB\-\-on\-error=continue\fR)
a failing sink is dropped and the others get every byte; every failure is diagnosed
(\fB2 of 3 sinks failed: ...\fR) and the exit status is 1.
.TP
\fBwarn\-nopipe\fR (bare \fB\-\-output\-error\fR, and \fB\-p\fR)
the same, but a reader that went away is dropped quietly and is no error: with only
that, the exit status is 0. While no input waits, the sinks that are pipes are watched:
when the last reader has gone, \fBtee\fR ends at once instead of at the next input (as
GNU \fBtee\fR 9.2); so does \fBexit\-nopipe\fR.
.TP
\fBexit\fR
the first sink that fails stops the run, EPIPE included (a message and exit 1, not 141).
.TP
\fBexit\-nopipe\fR
a reader that went away is dropped quietly and the others go on; any other failure stops
the run with exit status 1.
.PP
The mode must follow an equals sign (\fB\-\-output\-error=exit\fR): \fB\-\-output\-error
exit\fR is the bare option and a sink named \fBexit\fR, as with GNU's optional argument.
The report still lists a quietly dropped sink with the bytes it got and its error. When
every sink is gone, \fBtee\fR stops reading its source.
.PP
An output that cannot be opened (a missing directory, no permission) is a failed sink in
every mode, as in GNU \fBtee\fR: it is named, the others get every byte, and the exit
status is 1 (the report lists it with \fB(nothing written)\fR). If not one opens, the
source is not read. Refusing to write the source into itself, an interrupt and a usage
error still stop the run before any byte moves.
.SH COPY: PARALLEL TREES
\fB\-j\fR \fIN\fR copies a tree with \fIN\fR threads; the default is twice the CPUs
the process may run on (\fBsched_getaffinity\fR), at most 8 (a thread waiting in the
kernel on a directory's lock or an inode leaves its CPU to another), and \fB\-j 1\fR
copies on one thread. Operands are taken one after another by the calling thread.
A directory is one thread's job: it lists the directory with \fBgetdents64\fR, copies
its files, makes its symlinks and special files and creates its subdirectories, each of
which becomes a job any thread may take (when 64 wait, the thread that met one lists it
itself). So no two threads create files in one directory, and nothing is handed from
thread to thread per file. Every entry is opened at its directory's fd with
\fBO_NOFOLLOW\fR, and created at its destination directory's fd, which was opened at
its parent's.
A directory is created before its entries and gets its mode (and with
\fB\-\-preserve\fR its owner and times) after everything under it was written. The
report's \fBentries\fR, the \fB\-v\fR lines and the error lines come in the walk's
order, the order of \fB\-j 1\fR, whatever order the threads finish in: the calling
thread reports, and holds back what another thread did until everything before it in
that order is reported. Each thread learns on its own what the filesystems refuse (a
reflink on ext4), so with \fB\-j 4\fR up to four files may show
\fBreflink \-> copy_file_range (EOPNOTSUPP)\fR under \fB\-v\fR.
\fB\-\-limit\fR holds all the threads together (at the start each may take one slice,
an eighth of a second's worth), and the progress bar counts them all.
On SIGINT or SIGTERM no new file is started, the files in flight stop as any transfer
does, and the run reports and exits 130.
.SH COPY: FILES
In a tree, a file that follows an empty one is first looked at by name
(\fBfstatat\fR): when it is empty too, on a filesystem whose sizes are true (not
/proc or /sys), its copy is created and closed without the source being opened, three
syscalls instead of five (empty files come together: lock files, markers,
\fB__init__.py\fR). Not under \fB\-\-atomic\fR, \fB\-\-verify\fR or
\fB\-\-resume\fR, and not over an existing file, which is checked as any other.
A file of 1 MiB or more that is written whole from its start (not sparse, not resumed,
not cloned) has its blocks reserved before the first byte is written: one
\fBfallocate\fR(2) with \fBFALLOC_FL_KEEP_SIZE\fR, so the file stays as long as what
was written. On a delayed-allocation filesystem (ext4) the copy then finds its blocks in
place instead of reserving them a page at a time.
It is advice: a filesystem without \fBfallocate\fR, or a full one, copies as it would
have (a full disk fails at the write, as in \fBcp\fR). A copy cut short, or a source
that shrank, keeps no block reserved past its end.
.PP
Holes are left only in a destination that is a regular file (\fBcp\fR's rule): onto a
block device or any other sink the zeros are written, also with \fB\-\-sparse=always\fR,
so no old byte of the device survives where the source has a hole.
.PP
Files of procfs and sysfs are read to their end: their size says nothing of their bytes
(sysfs says 4096, procfs 0 or a guess), so the copy is never walked for holes, extended
or cut to that size; it has exactly the bytes a read gives.
.PP
\fB\-\-resume\fR keeps a destination only when every byte of it matches the source,
compared 1 MiB at a time (as long as reading it once more); a destination that differs
anywhere is copied again from the start. The time the check took is reported
(\fBresume_check_seconds\fR, and on the \fB\-v\fR line:
\fB6.00 MiB resumed (prefix checked in 2.1 ms)\fR).
.PP
\fB\-\-update\fR[\fB=\fR\fIWHICH\fR] chooses which existing destinations are
replaced, as in coreutils 9.5: \fBall\fR (the default without it), \fBnone\fR (none,
as \fB\-n\fR), \fBolder\fR (what a bare \fB\-\-update\fR means: only a destination
whose modification time, to the nanosecond, is before its source's; a symlink
destination is compared by what it points to). A destination kept is not an error: it is
counted in \fBskipped\fR, and the \fB\-v\fR line says why
(\fBskipped: not older than the source (\-\-update)\fR). Directories are always
entered.
.PP
\fB\-\-sync\fR calls \fBfdatasync\fR(2) on each file before it counts as done; a
file that cannot be synced fails. The progress bar then counts bytes on disk, not bytes
in the page cache (pv's \fB\-\-sync\fR): a file's bytes join it when its fdatasync
returns, and a file of more than 16 MiB is synced every 250 ms while it is copied so the
bar moves with the disk.
.PP
\fB\-\-verify\fR reads each file back after it is copied, whatever path copied it (a
reflink too), and compares it with its source, 4 MiB at a time. A difference fails that
file (exit status 1) and names the offset of the first differing byte:
\fBcannot copy 'a' to 'b': \-\-verify: the copy differs from the source at offset
1000000\fR. What it proves: when it ends, the destination reads back the same bytes as the
source does, so a source modified while it was copied, a short or misplaced copy, or an
offload that wrote the wrong bytes is caught. What it does not prove: without
\fB\-\-sync\fR the destination is read from the page cache, so bytes lost on their way to
the disk are not seen; with \fB\-\-sync\fR it is read after \fBfdatasync\fR(2) and
\fBPOSIX_FADV_DONTNEED\fR, from the disk on a disk filesystem (tmpfs has no disk; a
device's own cache can still answer). A reflink is compared through the shared extents:
it proves the clone reads as the source, not that the data is stored twice. Nor does it
say the source was right: a file still being written reads back equal when both reads
see the same bytes. The source is read twice, so a procfs or sysfs file that changes
between reads fails. A destination that cannot be read back (\fB\-\fR, a socket, a FIFO,
a character device) is a usage error before anything is written; so are
\fB\-\-atomic\fR, \fB\-\-sync\fR, \fB\-\-update\fR and \fB\-\-debug\fR on a copy
that would run as a stream (\fBcopy a \-\fR).
.PP
\fB\-\-atomic\fR writes each file (each file of a tree with \fB\-r\fR) to a temporary in
its destination's directory and renames it over the destination only when it is
complete: written, synced with \fB\-\-sync\fR, compared with \fB\-\-verify\fR. The
temporary is an \fBO_TMPFILE\fR where the filesystem has them (ext4, XFS, btrfs,
tmpfs): it has no name until it is linked in (\fBlinkat\fR of \fB/proc/self/fd/\fIN\fR)
as \fB.\fINAME\fB.zerocat\-\fIXXXXXX\fR and renamed over the destination, so even
SIGKILL leaves nothing behind; elsewhere it is that hidden name from the start, removed
when the copy fails. SIGINT, a full disk, a file size limit (\fBulimit \-f\fR: zerocat
takes EFBIG, not SIGXFSZ) or a failed verify leave the old destination byte for byte and
no temporary. The destination is replaced, not rewritten: a replaced file keeps its mode
(and its owner, where permitted), other hard links to it keep the old bytes, a
read\-only destination is replaced as by \fBmv\fR or \fBrsync\fR (the directory's
permissions decide), and a symlink destination is followed and its target replaced. A destination that is not a
regular file is refused. A destination directory where no file can be created is a
usage error before anything is written (\fB\-\-atomic: cannot create files in 'dir'\fR);
one of a tree that turns out so fails that file ("cannot create a temporary in 'dir'"). \fB\-\-resume\fR keeps a
partial destination and cannot be combined with \fB\-\-atomic\fR (a usage error).
.PP
\fB\-\-debug\fR is for \fBcp\fR's users: after each file copied it prints on stdout
cp 9.x's two lines, derived from what ran (the same record as the report):
\fB'a' \-> 'b'\fR, then \fBcopy offload: \fR\fIX\fR\fB, reflink: \fR\fIY\fR\fB, sparse
detection: \fR\fIZ\fR. \fIX\fR is \fByes\fR (copy_file_range moved bytes),
\fBavoided\fR (a reflink made copying needless), \fBunsupported\fR (copy_file_range
was refused before moving a byte) or \fBno\fR (not tried); \fIY\fR is \fByes\fR,
\fBunsupported\fR (tried, refused) or \fBno\fR (not tried); \fIZ\fR is \fBno\fR
(copied whole), \fBSEEK_HOLE\fR (walked extent by extent), \fBzeros\fR or
\fBSEEK_HOLE + zeros\fR (\fB\-\-sparse=always\fR: runs of zeros found by reading, in a
source that is not sparse or in the extents of one that is).
.PP
Two sources with the same name copied into one directory (\fBcopy a/x b/x dst/\fR): the
second is refused ("will not overwrite just\-created 'dst/x' with 'b/x'"), as by
\fBcp\fR; it is reported failed and the run ends with exit status 1.
.SH COPY: MODES, OWNERS AND SYMLINKS
A file, directory or special file that \fBcopy\fR creates gets the source's permission
bits through the umask, as with \fBcp\fR. An existing destination directory keeps its
mode under \fB\-r\fR.
.PP
\fB\-\-preserve\fR sets the exact mode (setuid, setgid, sticky), the owner where
permitted, and the times. When the owner cannot be kept (not root: chown is refused), the
copy belongs to the copier and loses setuid and setgid, as with \fBcp \-p\fR: another
user's setuid program never becomes one that runs as the copier. On an existing directory
\fB\-\-preserve\fR sets the source's mode, as \fBcp \-p\fR does; when that opens it (adds
a permission the directory did not have), a warning names it and both modes:
\fBzerocat: warning: 'dst/d': mode 0700 \-> 0755\fR. FIFOs and device nodes
(\fB\-\-special\fR) are made through the umask, and get the exact mode under
\fB\-\-preserve\fR.
.PP
A source operand that is a symlink is followed, except under \fB\-r\fR, which copies it
as a symlink (\fBcp\fR's rule). \fB\-L\fR (\fB\-\-dereference\fR), \fB\-H\fR and
\fB\-P\fR (\fB\-\-no\-dereference\fR) are \fBcp\fR's: \fB\-L\fR follows every symlink,
in trees too (a link to a directory that holds it is refused: "cannot copy cyclic symbolic
link"; one that cannot be followed fails with its errno), \fB\-H\fR the operands only,
\fB\-P\fR none; the last one given wins. In \fBcopy\fR, \fB\-L\fR is therefore not
\fB\-\-limit\fR, which keeps its long form there (\fBzerocat \-L 10M copy ...\fR, before
the command, is still the rate). \fBcp\fR's \fB\-s\fR and \fB\-l\fR are refused (a usage
error: symbolic/hard link copies are not supported; use \fBln\fR).
\fB\-\-remove\-destination\fR removes an existing destination before the copy is made,
instead of opening it: a symlink there is replaced, not written through.
.PP
A destination that is a symlink is written through to its target. A dangling one is
refused ("not writing through a dangling symlink", with \fB\-f\fR too, as \fBcp\fR); one that
cannot be followed for another reason fails naming the errno (a loop: \fBELOOP\fR; a
directory on the way that cannot be searched: \fBEACCES\fR), and \fB\-f\fR replaces it, as
\fBcp \-f\fR does. \fB\-\-parents\fR removes the directories it made for an operand that
failed, so none is left empty.
.PP
Without \fB\-L\fR, inside a tree, symlinks are copied as symlinks and never
followed: a file or directory the walk found is opened with \fBO_NOFOLLOW\fR, relative to
the directory it was listed in (\fBopenat\fR). An entry swapped for a symlink during the
copy is reported failed ("Too many levels of symbolic links", "Not a directory") instead
of copying what the link points to; a directory on its path swapped for a symlink does not
redirect it either. A destination operand that is a symlink to a directory is followed; a
symlink to a directory at a name inside the destination tree is refused ("cannot
overwrite a non\-directory with a directory"), as \fBcp\fR refuses it.
.SH TIMEOUTS
The same two options on \fBpipe\fR, \fBtee\fR and \fBrelay\fR, for every kind of endpoint:
.TP
\fB\-\-connect\-timeout\fR \fIDURATION\fR
a connector (\fBtcp:\fR, \fBtls:\fR, \fBunix:\fR) gives up an attempt after this long
(each attempt of \fBretry=\fR\fIN\fR), and a \fBtls:\fR handshake too (else 10 s): exit 1,
the message naming ETIMEDOUT. nc's \fB\-w\fR while connecting. (\fBrelay\fR: also how long
a \fBproxy\fR or TLS listener waits for a client's header and handshake.)
.TP
\fB\-\-idle\-timeout\fR \fIDURATION\fR
\fBpipe\fR, \fBtee\fR: the run ends once no byte moved for this long (nc \fB\-w\fR once
connected, \fB\-i\fR). A source that fell silent without closing (TCP, unix, TLS, a pipe
or terminal, UDP without a datagram) ends the run as its EOF would: every byte read is
delivered, sockets get their FIN, exit 0, and the report ends in \fB; idle timeout (no
byte for 2.00 s)\fR (JSON: \fBended\fR is \fBidle\-timeout\fR). A sink that took no byte
while the source had some fails the run (exit 1: "the sink took no byte for ..."): bytes
were not delivered. \fBrelay\fR: a connection that moved no byte either way is closed,
reported \fBidle\-timeout\fR and counted as failed (UDP: a session's end, 60 s by default).
.SH EOF AND HALF-CLOSE
How each command ends (nc, ncat and socat each spell these differently):
.TP
\fBpipe\fR, \fBtee\fR: at the source's EOF
a socket sink gets FIN (shutdown SHUT_WR; what it sent unread is drained, not reset), a
TLS sink close_notify, a UDP sink an empty datagram, a command's stdin is closed; exit 0.
\fBtee\fR: a failing sink as \fB\-\-on\-error\fR says.
.TP
\fB\-\-idle\-timeout\fR \fID\fR (pipe, tee): no byte for \fID\fR
as an EOF when the source was quiet (exit 0, \fBidle\-timeout\fR); a failure when the sink
took nothing (exit 1).
.TP
\fBpipe \-\-keep\-open\fR: at a signal
each connection's EOF ends that connection only; the run ends at SIGINT/SIGTERM, exit 130.
.TP
\fBrelay\fR: at both directions' EOF
an EOF on one side is passed on as a half\-close (SHUT_WR) to the other, whose direction
goes on until its own EOF (no socat \fB\-t\fR cut\-off); a reset is passed on as a reset.
\fBrelay \- tcp:\fR...: stdin's EOF is the half\-close (nc \fB\-N\fR always on), and the
run ends with the connection.
.TP
\fBrelay \-\-linger\fR \fID\fR: one direction's EOF, then \fID\fR
the other direction gets \fID\fR more, then both sides close with FIN (\fBlinger\fR, a
clean end: exit 0). nc \fB\-q\fR \fID\fR; \fB\-\-linger 0\fR ends at the first EOF.
.TP
\fBrelay \-\-idle\-timeout\fR \fID\fR: no byte either way for \fID\fR
the connection is closed (RST), \fBidle\-timeout\fR, counted failed (exit 1 under
\fB\-\-once\fR).
.TP
UDP: no EOF on the wire
zerocat's sender ends with an empty datagram, which zerocat's receiver takes as its EOF;
else \fB\-\-idle\-timeout\fR or a signal ends it.
.SH KEEP OPEN
\fBpipe \-\-keep\-open\fR (\fB\-k\fR) \fILISTENER\fR \fIDST\fR (nc \fB\-lk\fR, ncat \fB\-k\fR):
\fIDST\fR is opened once; then the listener's connections are taken one after another,
each moved whole into \fIDST\fR before the next is accepted (the others wait in the
listen backlog: two clients' bytes never interleave), until SIGINT or SIGTERM (exit 130,
every connection taken delivered) or \fIDST\fR fails (exit 1). A connection its client cut
(a reset, a TLS stream without close_notify) keeps the bytes it sent and is counted.
\fBzerocat pipe \-k tcp\-listen:0.0.0.0:514 file:log,append\fR is a log collector.
The report adds \fB; 20 connections\fR (\fB, 1 cut\fR); JSON: \fBconnections\fR and
\fBconnections_cut\fR. The source must be a listener (\fBtcp\-listen:\fR,
\fBunix\-listen:\fR, \fBtls\-listen:\fR, \fBfd:\fR\fIN\fR, \fBsystemd:\fR): anything else is
a usage error, and so is \fB\-\-idle\-timeout\fR with it (for now). For every connection
served at once, both ways, see \fBrelay\fR.
\fBtee \-\-keep\-open\fR \fILISTENER\fR \fIDST\fR... does the same into every \fIDST\fR:
the sinks are opened once (one that cannot be opened ends the run before any accept), and
each connection is fanned out whole to every sink before the next is accepted, so every
sink holds the connections in the same order, none interleaved. A sink that fails is left
out of the connections after, as \fB\-\-on\-error\fR says (\fBfail\fR, the default,
ends the run, exit 1; \fBcontinue\fR goes on with the others and exits 1 at the end); the
run ends too once no sink is left. Its report counts connections as pipe's does.
.SH PROBE
\fBzerocat probe\fR \fITARGET\fR... connects to each target and closes the connection at
once (\fBnc \-z\fR; a \fBtls:\fR target after its handshake, which \fBnc\fR cannot do):
\fBtcp:\fR\fIHOST\fR\fB:\fR\fIPORT\fR, a range \fBtcp:\fR\fIHOST\fR\fB:\fR\fILO\fR\fB\-\fR\fIHI\fR
(each port of it, \fBnc \-z host 20\-30\fR), \fBtls:\fR\fIHOST\fR\fB:\fR\fIPORT\fR with the
\fBtls:\fR options (\fBcafile=\fR, \fBpin=\fR, \fBverify=0\fR, \fBsni=\fR, a client
\fBcert=,key=\fR), \fBunix:\fR\fIPATH\fR. A name is resolved once; its addresses are
tried in order. At most 256 connections are made at once, non\-blocking, from one thread:
a thousand ports take a few milliseconds on loopback. Nothing is sent (TLS: the
handshake only); the peer sees a connection open and close (TLS: a handshake then a
close without close_notify).
.PP
One line per target on stdout, in the order given:
\fBtcp:127.0.0.1:5432 open (0.21 ms)\fR,
\fBtcp:127.0.0.1:5433 refused (0.10 ms): ECONNREFUSED\fR,
\fBtcp:10.0.0.9:5432 timeout (5.00 s): no answer within 5.00 s\fR,
\fBtls:db:5432 open (3.10 ms): TLSv1.3 TLS13_AES_256_GCM_SHA384, subject CN=db, expires
2027\-01\-01 00:00:00 UTC\fR. The states: \fBopen\fR (connected; TLS: handshake complete
and the certificate trusted), \fBrefused\fR (ECONNREFUSED, a reset, or no socket at a unix
path: ENOENT), \fBtimeout\fR (no answer within \fB\-\-connect\-timeout\fR, default 5 s: a
dropped SYN, a full backlog, a stalled handshake), \fBunreachable\fR (EHOSTUNREACH,
ENETUNREACH), \fBfailed\fR (a name that does not resolve, a TLS handshake refused, with
the reason). Under \fB\-\-wait\fR a line also says \fB(after\fR \fIN\fR \fBtries)\fR.
\fB\-\-stats json\fR makes each line a JSON object: \fBtarget\fR, \fBstate\fR,
\fBseconds\fR, \fBtries\fR, and \fBerrno\fR, \fBreason\fR or \fBtls\fR (\fBversion\fR,
\fBcipher\fR, \fBsubject\fR, \fBnot_after\fR). \fB\-q\fR prints nothing: the exit status
says it all (a healthcheck). \fB\-v\fR adds, on stderr, each failed try under \fB\-\-wait\fR
and a last line \fBzerocat: 3 of 4 open in 1.2 ms\fR.
.PP
\fB\-\-wait\fR \fIDURATION\fR tries again, every 250 ms, the targets not open yet, until
every one is (exit 0) or the time is over (exit 1); the last try is cut to the time
left. This is wait\-for\-it: \fBzerocat probe \-q \-\-wait 30s tcp:db:5432 && exec
server\fR. \fB\-\-connect\-timeout\fR \fIDURATION\fR bounds each try (nc \fB\-w\fR with
\fB\-z\fR).
.PP
Exit status: \fB0\fR every target open; \fB1\fR at least one is not (after
\fB\-\-wait\fR: when the time ran out); \fB2\fR a usage error, before anything is
connected: a target that is not \fBtcp:\fR, \fBtls:\fR or \fBunix:\fR, a range written
backwards (\fB30\-20\fR) or past the ports there are (\fB0\fR, above \fB65535\fR),
options that would send bytes or retry (\fBproxy=\fR, \fBsocks5=\fR, \fBconnect=\fR,
\fBretry=\fR: \fB\-\-wait\fR is probe's); \fB130\fR interrupted.
.SH DROP-IN NAMES: NC, TEE, PV
Called through a link named \fBnc\fR, \fBnetcat\fR, \fBncat\fR, \fBtee\fR or \fBpv\fR
(\fBzerocat install\-links\fR \fIDIR\fR \fB[\-\-force]\fR makes them), or as \fBzerocat nc\fR
\fIARGS\fR, \fBzerocat pv\fR \fIARGS\fR, \fBzerocat compat\fR \fINAME\fR \fIARGS\fR, zerocat
takes that tool's own flags; the bytes move by the engine's paths as ever. \fBzerocat
tee\fR keeps zerocat's grammar (\fISRC DST...\fR); GNU tee's is \fBzerocat compat tee\fR or
the \fBtee\fR link. Quiet as those tools are: \fB\-\-zerocat\-report\fR[\fB=json\fR], anywhere
on the line, prints zerocat's report at the end. A flag zerocat does not take is refused
with the tool's usage error (nc and tee exit 1, pv 64) and a line naming the zerocat way.
.TP
nc
OpenBSD netcat's \fB\-4 \-6 \-C \-d \-i \-k \-l \-N \-n \-P \-q \-U \-u \-v \-z \-e \-c \-p \-s
\-w \-X \-x\fR (with ncat's long spellings). It connects, scans (\fB\-z\fR, several ports, port ranges
\fILO\-HI\fR, service names; \fB\-uz\fR for UDP) and accepts itself, so the lines and exit
codes scripts read are OpenBSD's
(\fBConnection to H P port [tcp/*] succeeded!\fR, \fBnc: connect to H port P (tcp) failed:
Connection refused\fR, \fBListening on A P\fR, \fBConnection received on A P\fR), then
relays the connected socket with stdin and stdout (\fB\-d\fR: to stdout only; \fB\-e\fR,
\fB\-c\fR: with a command). \fB\-C\fR sends each LF of stdin that has no CR before it as
CRLF, \fB\-i\fR \fISECS\fR (whole seconds) pauses after each line sent (not between
ports, as Debian's nc): both read every byte, so stdin's bytes go by userspace, through a
thread that rewrites or paces them, and the report says why (\fBuserspace because nc \-C
rewrites each line end\fR). \fB\-P\fR \fIUSER\fR with \fB\-X connect\fR: as nc, a first try
without credentials, then on the proxy's 407 the password asked on the terminal
(\fBProxy password for USER@HOST:\fR, echo off; four tries); no terminal is nc's
\fBUnable to read proxy passphrase\fR (exit 1) \(em give it in \fBZEROCAT_PROXY_AUTH\fR
instead. Exit 0 when the connection (or, with \fB\-z\fR, one port)
answered, 1 otherwise; \fB\-w\fR seconds of silence end a session cleanly (exit 0).
Differences: stdin's EOF always half-closes the connection (what \fB\-N\fR asks);
\fB\-q\fR is Debian's (the session still ends when the peer closes) without its extra
wait; \fB\-lk\fR without a command writes each connection to stdout in turn, whole
(\fBpipe \-\-keep\-open\fR), and sends them nothing; a listener shows peers numerically; a
peer's reset, or with \fB\-u\fR a refused datagram, ends with exit 1 and the error (nc: exit
0, silent); \fB\-u\fR ends a minute after stdin's EOF without \fB\-w\fR or \fB\-q\fR (nc
waits for ever), \fB\-q\fR there bounding the silence as \fB\-w\fR does; \fB\-uzv\fR sends
its five X probes 100 ms apart. Refused: \fB\-D \-F \-I \-M \-m \-O \-r \-S \-T \-t \-V
\-W \-Z\fR, \fB\-X 4\fR.
.TP
tee
GNU coreutils 9's \fB\-a \-i \-p \-\-output\-error\fR[\fB=\fR\fIMODE\fR] \fB\-\-help \-\-version\fR:
stdin to each \fIFILE\fR (always a file name: \fB\-\fR and \fBtcp:x\fR are files) and to
stdout, by tee(2) where the kernel allows; a failed output said as GNU says it (\fBtee:
FILE: No such file or directory\fR); the exit modes stop at an output that cannot be
opened, as GNU's do.
.TP
pv
pv's \fB\-p \-t \-e \-r \-a \-b \-n \-q \-c \-W \-f \-C \-l \-0 \-s \-L \-i \-w \-N\fR on one \fIFILE\fR
or stdin, to stdout: pv's display on stderr (when it is a terminal, or with \fB\-f\fR;
\fB\-n\fR prints an integer percentage a line, for \fBdialog \-\-gauge\fR), \fB\-L\fR
shrinking each splice as \fB\-\-limit\fR does, \fB\-C\fR forcing \fB\-\-via userspace\fR.
\fB\-l\fR counts lines (\fB\-0\fR: NUL-ended ones), \fB\-s\fR and \fB\-L\fR then in
lines, amounts as pv shows lines (no B, powers of 1000): a thread reads every byte to
count them, so they go by userspace and the report says why. Refused:
\fB\-S \-B \-R \-P \-d \-F\fR and several \fIFILE\fRs.
.SH HTTP
\fBhttp://\fIHOST\fR[\fB:\fIPORT\fR]\fB/\fIPATH\fR[\fB?\fIQUERY\fR] and \fBhttps://\fR... are
the URL as curl takes it (parsed by the \fBurl\fR crate; a password in it is sent as Basic
credentials and shown as \fB***\fR), then zerocat's options after commas. As a source
(\fBpipe\fR, \fBtee\fR, \fBcopy\fR) it is a GET; as a sink (the same three) a PUT, or
the method of \fB,method=POST\fR (\fBPATCH\fR too). HTTP/1.1 with keep\-alive: a connection
whose answer was read exactly to its end (Content\-Length or the last chunk, never a body
that ends at the close) and that the server keeps open carries the next request to the
same server, proxy and TLS settings (\fBcopy \-j\fR's ranges and resumes, and every
\fBs3://\fR request); one the server closed while idle is replaced by a new connection
once, when nothing was answered on it and the request's body can be sent again.
\fBAccept\-Encoding: identity\fR: the body is never decompressed, it is spliced. The response head is read with MSG_PEEK and parsed by httparse, never a byte
of the body with it; a head larger than 64 KiB is refused.
.PP
\fB,header=\fINAME\fB:\fIVALUE\fR adds a header (repeatable; a value is never shown: the
endpoint is printed as \fBheader=\fINAME\fB:***\fR); a \fBHost\fR given so replaces the
URL's (one Host is sent, first), as do \fBUser\-Agent\fR and \fBAccept\fR. An inline value is in zerocat's command
line, so \fBps\fR shows it: for a token, \fB,header=@\fIFILE\fR reads \fBName: value\fR
lines from \fIFILE\fR when the endpoint opens, and \fB,header\-env=\fINAME\fB:\fIVAR\fR
sends header \fINAME\fR with the value of environment variable \fIVAR\fR (a usage error
when it is unset); neither puts the token in a command line, a report, \fB\-\-log\fR or a
message. \fB,range=\fISTART\fB\-\fR[\fIEND\fR] asks for those bytes only (a source): the
answer must be a 206 whose Content\-Range starts at \fISTART\fR and ends no later than
\fIEND\fR; a 200 (a server that ignores ranges) writes nothing and exits 1.
.PP
\fBhttps://\fR takes every \fBtls:\fR option: \fB,cafile=\fR, \fB,pin=\fR, \fB,sni=\fR (the
name sent and verified; by default the URL's host unless it is an address),
\fB,verify=0\fR (insecure, with a warning), \fB,cert=\fR and \fB,key=\fR; the record layer
is kTLS where the kernel takes the suite, else rustls in userspace, and the report names it
as a \fBtls:\fR side's. Both take the outbound options \fBtcp:\fR takes (\fB,socks5=\fR,
\fB,connect=\fR (an HTTP proxy's CONNECT), \fB,proxy\-auth=\fR, \fB,retry=\fR,
\fB,interval=\fR, \fB,mptcp\fR). Without \fB,socks5=\fR or \fB,connect=\fR, the proxies
of the environment are honoured as curl reads them: \fBhttp_proxy\fR (lower case only, as
curl), \fBhttps_proxy\fR or \fBHTTPS_PROXY\fR, then \fBall_proxy\fR or \fBALL_PROXY\fR;
\fBno_proxy\fR/\fBNO_PROXY\fR (\fB*\fR, or names whose suffix matches) skips them. An
\fBhttp://\fR proxy gets an http URL in absolute form and tunnels https with CONNECT; a
\fBsocks5://\fR proxy tunnels both; credentials in the proxy's URL are given to the proxy
(Proxy\-Authorization, or SOCKS5's user and password).
.PP
Redirects (301, 302, 303, 307, 308 with a Location) are followed, at most 10: 307 and 308
keep the method and the body, the others turn into a GET without one; a redirect from
https to http is refused, and Authorization, Cookie and Proxy\-Authorization are not sent
to another scheme, host or port. An upload asks \fBExpect: 100\-continue\fR and sends its
body after the server's go (or a second of silence): \fBContent\-Length\fR and
\fBsendfile\fR from a regular file, \fBTransfer\-Encoding: chunked\fR from a stream, each
run of the pipe's bytes one chunk spliced. The upload's answer is awaited up to 30 s.
.PP
Any status other than 2xx is exit 1, the message naming the URL, the status and its
reason, and the first bytes of the error's body, escaped (\fBcurl \-f\fR): none of it is
written into the sink. So are, naming the URL and with nothing beyond the valid body in the
sink: a head over 64 KiB, an invalid status line, a bad chunk size, both
Transfer\-Encoding and Content\-Length, a Content\-Range other than the one asked, and more
body than announced. A URL without a host, a port out of range, an unknown scheme, a
\fB,range=\fR that does not parse, an option http does not take, and \fB\-j\fR or
\fB\-\-resume\fR into a stream (\fB\-\fR, a FIFO, a device, a socket) are usage errors, exit
2, before any connection and before the sink is opened. An untrusted certificate is exit 1,
said in words with the option that would trust it.
.PP
The report names the exchange before the path that moved its body:
\fBhttp 200 (1073741824 bytes) socket \-> file via splice\fR, \fBhttp 200 (chunked)\fR,
\fBhttp 200 (to the close, unverified)\fR (no length to check the body by),
\fBhttp PUT 201\fR; an https side adds \fB(tls: ...)\fR; resumes add \fB(resumed at
\fIN\fB (\fIcause\fB))\fR. In JSON, the side's \fBhttp\fR object: \fBmethod\fR,
\fBstatus\fR and \fBreason\fR (of the answer whose body moved, or of the upload's answer; 0
when none came), \fBurl\fR (the URL that answered, after redirects), \fBetag\fR (or null),
\fBredirects\fR, \fBframing\fR (\fBcontent\-length\fR, \fBchunked\fR, \fBclose\fR),
\fBcontent_length\fR (or null), \fBspliced\fR and \fBcopied\fR (body bytes the endpoint
moved by splice and by read/write), \fBunverified\fR, \fBresumes\fR (each \fBoffset\fR,
\fBcause\fR: \fBreset\fR, \fBclosed early\fR, \fBchunked body cut\fR or \fBidle\fR, and
\fBattempts\fR), \fBresume_off\fR (why a cut body could not have been resumed, or null),
and for \fBcopy \-\-resume\fR/\fB\-j\fR \fBresumed_from\fR, \fBranges\fR and
\fBvalidator_kept\fR; an https side adds \fBtls\fR as a \fBtls:\fR side does.
.SS "Resume and ranges"
An http(s) source whose body stops short \(em the connection reset, closed before its
Content-Length, a chunked body cut before its last chunk, or no byte for
\fB--idle-timeout\fR (default 30 s) \(em is asked again from the next byte:
\fBRange: bytes=\fIN\fB-\fR with \fBIf-Range:\fR the first answer's strong ETag (or its
Last-Modified, when at least a second older than its Date). A 206 whose Content-Range starts
at exactly \fIN\fR continues into the same sink (a file, a pipe, a socket, every sink of tee).
A 200 (the object changed, or the server ignores ranges), a 206 naming another ETag, or a
Content-Range other than the one asked fail the run (exit 1, "the object changed after
\fIN\fR bytes"), with nothing of that answer written. An answer without a strong ETag or a
Last-Modified gets no resume at all. The first attempt goes at once, the next after
\fB--retry-wait\fR (1 s), doubled each time; \fB--retries\fR \fIN\fR (5) attempts in a row
that get nowhere end the run (0: no resume). A resumed connection that breaks before it
carried 1 MiB or lasted \fB--retry-wait\fR is such an attempt, so a server that cuts every
connection early sees \fIN\fR reconnections spaced out, not one every few bytes. Each resume is in the report (offset, cause)
and in JSON (\fBhttp.resumes\fR).
.PP
\fBcopy --resume\fR \fIURL FILE\fR continues a partial \fIFILE\fR (curl \fB-C -\fR, wget
\fB-c\fR): the object's validator is kept with the file, in its extended attribute
\fBuser.zerocat.etag\fR, or, where the filesystem refuses user xattrs, in a hidden
\fB.\fINAME\fB.zerocat-etag\fR beside it (JSON \fBhttp.validator_kept\fR says which). The
next run asks from the file's length with If-Range that validator: the same version is
appended, a changed one is written again from the start, never appended to. A file with no
kept validator is fetched whole.
.PP
\fBcopy -j\fR \fIN URL FILE\fR (aria2c \fB-x\fR \fIN\fR): a one-byte probe, then \fIN\fR
ranges at once, each with If-Range and each resumed on its own, into a temporary in the
file's directory renamed over it once every range is whole (the \fB--atomic\fR rules):
\fIFILE\fR appears whole or not at all. A server without ranges or a validator gets one
connection. \fB-j\fR into a stream (\fB\-\fR, a FIFO, a device) is a usage error.
.SH SIGNALS
.TP
SIGINT, SIGTERM
stop taking bytes from the source; bytes already taken (in zerocat's pipes or buffer)
are still delivered while the sinks take them, for at most one second (a second signal
cuts that short), so a reader that stalls cannot hold the run; the report is printed with
the bytes each sink got, its text line ending in \fB; interrupted\fR (JSON:
\fBended\fR is \fBsignal\fR); exit status 130. The progress bar is cleared first.
\fBrelay\fR stops accepting at once and lets the connections in flight go on for
\fB\-\-grace\fR (default 2 s); then it resets those still open, reported as ended by
\fBsignal\fR. A second signal cuts them at once. Connections accepted whose PROXY header
or TLS handshake is not complete are closed at the signal (or at \fB\-\-once\fR's first
connection) and listed as \fBnot\-served\fR, their client named (not failures: nothing of
their streams was taken).
.TP
SIGHUP
\fBrelay \-\-log\fR \fIFILE\fR reopens the log (logrotate's \fBpostrotate\fR habit): the
next line goes to the file now at \fIFILE\fR, and the relay goes on. Otherwise, the
default: the process ends (inherited stdio gets its flags back first).
.TP
SIGUSR1
print one progress line on stderr (dd's habit), bar or no bar:
\fBzerocat: 512 MiB in 2.00 s (256 MiB/s), 50% of 1.00 GiB\fR;
\fBcopy\fR adds the files, \fB, 12 files done\fR (\fB, 12/40 files\fR with the bar's
totals). \fBrelay\fR prints its running totals: \fBzerocat: relay: 2 open, 14 done, 1.20
MiB a \-> b, 3.40 MiB b \-> a (of those done), up 12.3 s, 310 KiB/s since the last
line\fR (both ways, of connections done; \fBsince start\fR the first time); \fB\-\-progress\fR prints that
line every second (a relay draws nothing unless asked), and \fB\-\-size\fR is a usage
error for it. (A UDP relay does not print them yet.)
.TP
SIGPIPE
ignored: a reader that went away is an EPIPE, handled per sink.
.SH EXIT STATUS
.TP
\fB0\fR
every byte delivered (\fBprobe\fR: every target open).
.TP
\fB1\fR
runtime error: I/O error, refused connection, disk full; the message names the endpoint
and the errno. (\fBprobe\fR: a target not open; see PROBE).
.TP
\fB2\fR
usage error: bad option or URI, or a \fB\-\-via\fR path the endpoints cannot take.
.TP
\fB130\fR
interrupted by SIGINT or SIGTERM (the report is still printed).
.TP
\fB141\fR
stdout's reader went away (the shell's code for SIGPIPE), without a message
(\fBtee\fR: unless \fB\-\-output\-error\fR says otherwise).
.SH EXAMPLES
.TP
\fBzerocat pipe big.iso \- | sha256sum\fR
a file into a pipe, via splice.
.TP
\fBtar c dir | zerocat pipe \- tcp:backup.lan:9000\fR
a stream to a socket.
.TP
\fBzerocat pipe tcp\-listen:9000 backup.tar\fR
receive one connection on 127.0.0.1:9000 into a file.
.TP
\fBzerocat \-\-limit 10M \-\-progress pipe disk.img tcp:host:9000\fR
send a file at 10 MiB/s with a progress bar; sendfile stays the path.
.TP
\fBzcat dump.gz | zerocat \-\-size 4G pipe \- dump.sql\fR
a stream of known size: the bar shows an ETA.
.TP
\fBzerocat \-\-stats json pipe a.bin b.bin\fR
the report as JSON, for scripts.
.TP
\fBzerocat \-\-via userspace pipe a.bin b.bin\fR
copy through memory, trusting no kernel offload.
.TP
\fBzerocat \-v \-\-explain pipe a.bin \-\fR
print the plan (fd kinds, chosen paths) and move nothing.
.TP
\fBkill \-USR1 $(pidof zerocat)\fR
ask a running transfer how far it got.
.TP
\fBzerocat relay tcp\-listen:0.0.0.0:8080,reuseport tcp:app:80\fR
one of several relays on one port; the kernel spreads the connections.
.TP
\fBzerocat relay tcp\-listen:0.0.0.0:8443,proxy tcp:app:443,proxy=v2\fR
behind HAProxy: read the client from its PROXY header, pass it on to the backend. The
HAProxy side, in TCP mode:
.RS
.PP
.nf
backend zerocat
    mode tcp
    server z1 127.0.0.1:8443 send\-proxy\-v2
.fi
.PP
and to send to a HAProxy \fBbind :9000 accept\-proxy\fR:
\fBzerocat relay tcp\-listen:8080 tcp:lb:9000,proxy=v2\fR.
.RE
.SH CAVEATS
Splicing or sendfile\-ing a file hands the reader page\-cache pages, not a snapshot: a
write to the file after zerocat returns can still show through in bytes the reader has
not read yet (why Rust's std refuses file \(-> pipe splice; GNU cat 9.11 and pv do it).
\fB\-\-via userspace\fR copies the bytes at once.
.PP
Only a checksum proves a copy: filesystems have shipped offload bugs (OpenZFS 2.2.0
block cloning). \fB\-\-via userspace\fR is the escape hatch when a filesystem's offload
is not trusted.
.SH FILES
The Debian package (\fBcargo deb\fR) installs the man page as
\fI/usr/share/man/man1/zerocat.1.gz\fR and the completions as
\fI/usr/share/bash\-completion/completions/zerocat\fR,
\fI/usr/share/zsh/vendor\-completions/_zerocat\fR and
\fI/usr/share/fish/vendor_completions.d/zerocat.fish\fR. \fBcargo install \-\-path .\fR
installs only the binary; the rest comes from it:
\fBzerocat man > /usr/local/share/man/man1/zerocat.1\fR,
\fBzerocat completions bash > /usr/share/bash\-completion/completions/zerocat\fR (zsh:
a directory on \fB$fpath\fR, as \fI_zerocat\fR; fish:
\fI~/.config/fish/completions/zerocat.fish\fR).
.SH REPORTING BUGS
\fBzerocat version \-v\fR (or \fBzerocat \-V \-v\fR) prints the version, the commit it was
built from, the kernel, and what this kernel offers, each probed now: copy_file_range
across filesystems, the \fBtls\fR ULP for kTLS, MPTCP sockets, UDP GSO and io_uring (a
\fBno\fR names the errno). Put its lines in a bug report. Versions follow semver from 0.4.0:
a changed report field or exit code is a breaking change, and CHANGELOG.md says so.
.SH SEE ALSO
\fBsplice\fR(2), \fBtee\fR(2), \fBsendfile\fR(2), \fBcopy_file_range\fR(2),
\fBsocat\fR(1), \fBnc\fR(1), \fBpv\fR(1), \fBcat\fR(1), \fBcp\fR(1)
"#;
