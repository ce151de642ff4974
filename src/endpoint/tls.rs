//! TLS endpoints (`tls:`, `tls-listen:`, `systemd:…,tls`). rustls does the handshake on a
//! non-blocking socket ([`Handshake::advance`]: the relay's event loop and a listener's
//! greetings drive it on readiness, `pipe` on a poll of its own). Once it is done,
//! [`Handshake::establish`] hands the record layer to the kernel (kTLS, `sys::ktls`) where
//! the kernel takes the negotiated suite, so the engine splices and sendfiles TLS traffic
//! as on any socket; where it does not, rustls keeps the record layer on a thread of its own
//! (`bridge.rs`) between the TCP socket and a socketpair whose other end the engine gets.
//! Either way the engine meets a plain stream socket, and [`TlsInfo`] says which ran.

pub(crate) mod bridge;
mod trust;

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    ClientConfig, ClientConnection, Connection, ProtocolVersion, RootCertStore, ServerConfig,
    ServerConnection,
};

use super::TlsOpts;
pub use crate::sys::ktls::TlsInfo;
use crate::sys::{self, ktls};
pub use trust::certificate_sha256;
use trust::{explain, ClientCheck, ServerCheck, We};

/// How long a handshake may take when no `--connect-timeout` says otherwise.
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(10);

/// A client's configuration, made once per endpoint (certificates read once).
pub fn client_config(tls: &TlsOpts) -> anyhow::Result<Arc<ClientConfig>> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow!("TLS: {e}"))?;
    let check = if tls.insecure {
        ServerCheck::anything(provider())
    } else {
        // pin= alone is the trust: no roots to consult. cafile= (with or without a pin)
        // or neither: webpki over cafile='s certificates or the system's roots.
        let webpki = match (&tls.pin, &tls.cafile) {
            (Some(_), None) => None,
            (_, cafile) => Some(
                WebPkiServerVerifier::builder_with_provider(
                    Arc::new(roots(cafile.as_deref())?),
                    provider(),
                )
                .build()
                .map_err(|e| anyhow!("TLS: cannot verify servers with these roots: {e}"))?,
            ),
        };
        let own = match &tls.cafile {
            Some(path) => read_certs(path, "CA file")?,
            None => Vec::new(),
        };
        ServerCheck::verified(provider(), webpki, own, tls.pin)
    };
    let builder = builder
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(check));
    let mut config = match (&tls.cert, &tls.key) {
        (Some(cert), Some(key)) => builder
            .with_client_auth_cert(read_certs(cert, "certificate")?, read_key(key)?)
            .map_err(|e| mismatch(cert, key, &e))?,
        _ => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn(tls);
    config.enable_secret_extraction = ktls::ulp_offered();
    Ok(Arc::new(config))
}

/// A listener's configuration: its certificate and key (read once, here), and with
/// `cafile=` the roots every client must present a certificate from.
pub fn server_config(tls: &TlsOpts) -> anyhow::Result<Arc<ServerConfig>> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow!("TLS: {e}"))?;
    let builder = match &tls.cafile {
        Some(path) => {
            let webpki = WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots(Some(path))?),
                provider(),
            )
            .build()
            .map_err(|e| anyhow!("CA file '{}': {e}", path.display()))?;
            let own = read_certs(path, "CA file")?;
            builder.with_client_cert_verifier(Arc::new(ClientCheck::new(webpki, own)))
        }
        None => builder.with_no_client_auth(),
    };
    let (Some(cert), Some(key)) = (&tls.cert, &tls.key) else {
        bail!("a TLS listener needs cert=PEM and key=PEM");
    };
    let mut config = builder
        .with_single_cert(read_certs(cert, "certificate")?, read_key(key)?)
        .map_err(|e| mismatch(cert, key, &e))?;
    config.alpn_protocols = alpn(tls);
    // No session tickets after the handshake: nothing but the stream follows it, which
    // is what a kernel record layer expects; clients resume by full handshakes.
    config.send_tls13_tickets = 0;
    config.enable_secret_extraction = ktls::ulp_offered();
    Ok(Arc::new(config))
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn alpn(tls: &TlsOpts) -> Vec<Vec<u8>> {
    tls.alpn.iter().map(|p| p.as_bytes().to_vec()).collect()
}

/// `cert=` and `key=` refused together: the key is not the certificate's, or rustls cannot
/// present the certificate at all (an X.509 v1 one, say).
fn mismatch(cert: &Path, key: &Path, e: &rustls::Error) -> anyhow::Error {
    match e {
        rustls::Error::InvalidCertificate(problem) => anyhow!(
            "the certificate '{}' cannot be presented: {}",
            cert.display(),
            trust::own_certificate(problem)
        ),
        _ => anyhow!(
            "the certificate '{}' and the key '{}' do not go together: the key is not the \
             certificate's (give the key it was made with)",
            cert.display(),
            key.display()
        ),
    }
}

fn read_certs(path: &Path, what: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let cannot =
        |e: &dyn std::fmt::Display| anyhow!("cannot read the {what} '{}': {e}", path.display());
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| cannot(&e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| cannot(&e))?;
    if certs.is_empty() {
        bail!("the {what} '{}' holds no PEM certificate", path.display());
    }
    Ok(certs)
}

/// The private key: read once, never shown (errors name the file, not its bytes).
fn read_key(path: &Path) -> anyhow::Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => anyhow!(
            "the private key '{}' holds no PEM private key (a BEGIN PRIVATE KEY, RSA PRIVATE \
             KEY or EC PRIVATE KEY section): is it the certificate? key= names the key",
            path.display()
        ),
        e => anyhow!("cannot read the private key '{}': {e}", path.display()),
    })
}

/// `cafile=`'s certificates, or the system's roots.
fn roots(cafile: Option<&Path>) -> anyhow::Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    match cafile {
        Some(path) => {
            for cert in read_certs(path, "CA file")? {
                roots
                    .add(cert)
                    .map_err(|e| anyhow!("the CA file '{}': {e}", path.display()))?;
            }
        }
        None => {
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
            if roots.is_empty() {
                bail!(
                    "no system root certificates (install ca-certificates), so no server can \
                     be verified; name its CA with cafile=PEM"
                );
            }
        }
    }
    Ok(roots)
}

/// The warning `verify=0` prints when its endpoint opens (or the relay starts).
pub fn insecure_warning(endpoint: &str) -> String {
    format!(
        "zerocat: warning: {endpoint}: verify=0: the server's certificate is not verified; \
         anyone on the path can read and change this stream"
    )
}

/// Prints [`insecure_warning`] the first time `endpoint` opens in this process: an s3://
/// or https:// endpoint opens a connection a request (parts, resumes), and one warning
/// says it for all of them.
pub fn warn_insecure_once(endpoint: &str) {
    static WARNED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    if !warned.iter().any(|w| w == endpoint) {
        warned.push(endpoint.to_string());
        eprintln!("{}", insecure_warning(endpoint));
    }
}

/// A socket as rustls' reader and writer: EAGAIN comes back as WouldBlock.
struct FdIo<'a>(BorrowedFd<'a>);

impl Read for FdIo<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        sys::read(self.0, buf).map_err(io::Error::from)
    }
}

impl Write for FdIo<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        sys::write(self.0, buf).map_err(io::Error::from)
    }

    /// rustls hands its queued records at once: one writev, not a write per record.
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        loop {
            match nix::sys::uio::writev(self.0, bufs) {
                Err(Errno::EINTR) => {}
                other => return other.map_err(io::Error::from),
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A TLS handshake in progress on a non-blocking socket.
pub struct Handshake {
    conn: Connection,
    /// The name a client sent (SNI) and verified.
    sni: Option<String>,
    /// Where the handshake's reads are in the peer's records.
    records: RecordReads,
}

/// The handshake reads the socket a record at a time: rustls then holds no byte past the
/// record that ends the handshake. The peer's first application records (a client's
/// request sent with its Finished) stay in the socket, where the caller's epoll sees them
/// and the kernel's record layer (kTLS) gets whole records, never the tail of one that
/// rustls had read in part (a stream lost, EBADMSG).
#[derive(Default)]
struct RecordReads {
    /// Header bytes read of the next record, and how many.
    header: [u8; 5],
    header_got: usize,
    /// Bytes of the current record's body still to read.
    body_left: usize,
}

impl RecordReads {
    fn read(&mut self, fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
        if self.body_left == 0 {
            let want = (self.header.len() - self.header_got).min(buf.len());
            let n = sys::read(fd, &mut buf[..want]).map_err(io::Error::from)?;
            self.header[self.header_got..self.header_got + n].copy_from_slice(&buf[..n]);
            self.header_got += n;
            if self.header_got == self.header.len() {
                self.header_got = 0;
                self.body_left = usize::from(u16::from_be_bytes([self.header[3], self.header[4]]));
            }
            return Ok(n);
        }
        let want = self.body_left.min(buf.len());
        let n = sys::read(fd, &mut buf[..want]).map_err(io::Error::from)?;
        self.body_left -= n;
        Ok(n)
    }
}

/// [`RecordReads`] on a socket, as rustls' reader.
struct RecordIo<'a>(BorrowedFd<'a>, &'a mut RecordReads);

impl Read for RecordIo<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.1.read(self.0, buf)
    }
}

impl Handshake {
    /// A client's handshake with `name` (the SNI, and the name the certificate must carry;
    /// an IP address is verified against the certificate's IP addresses, with no SNI).
    pub fn client(config: &Arc<ClientConfig>, name: &str) -> Result<Handshake, String> {
        let server = ServerName::try_from(name.to_string()).map_err(|_| {
            format!("'{name}' is not a name to verify a certificate for (sni=NAME)")
        })?;
        // An IP address is verified, not sent: SNI carries names only.
        let sni = matches!(server, ServerName::DnsName(_)).then(|| name.to_string());
        let conn =
            ClientConnection::new(config.clone(), server).map_err(|e| format!("TLS: {e}"))?;
        Ok(Handshake {
            conn: conn.into(),
            sni,
            records: RecordReads::default(),
        })
    }

    pub fn server(config: &Arc<ServerConfig>) -> Result<Handshake, String> {
        let conn = ServerConnection::new(config.clone()).map_err(|e| format!("TLS: {e}"))?;
        Ok(Handshake {
            conn: conn.into(),
            sni: None,
            records: RecordReads::default(),
        })
    }

    /// Moves the handshake on as far as the socket allows: Ok(true) once it is complete
    /// (its last flight sent), Ok(false) while it waits for the socket (readable, or
    /// writable when a send said EAGAIN), or the reason it failed (the alert rustls sends
    /// the peer goes out first).
    pub fn advance(&mut self, fd: BorrowedFd<'_>) -> Result<bool, String> {
        let mut io = FdIo(fd);
        loop {
            while self.conn.wants_write() {
                match self.conn.write_tls(&mut io) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                    Err(e) => return Err(format!("TLS handshake: sending: {e}")),
                }
            }
            if !self.conn.is_handshaking() {
                return Ok(true);
            }
            match self.conn.read_tls(&mut RecordIo(fd, &mut self.records)) {
                Ok(0) => return Err(closed_in_handshake(we(&self.conn))),
                Ok(_) => {
                    if let Err(e) = self.conn.process_new_packets() {
                        // The alert rustls queued tells the peer why.
                        let _ = self.conn.write_tls(&mut io);
                        return Err(format!(
                            "TLS handshake failed: {}",
                            explain(&e, we(&self.conn))
                        ));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(format!("TLS handshake: receiving: {e}")),
            }
        }
    }

    /// Whether the handshake waits to send: a caller polling on its own wants POLLOUT too.
    pub fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    /// What a completed handshake shows `probe`: the version, the suite, and the peer's
    /// certificate (its subject and when it expires), where it presented one.
    pub fn peer(&self) -> PeerSummary {
        let certificate = self
            .conn
            .peer_certificates()
            .and_then(|chain| chain.first())
            .and_then(|der| trust::subject_and_expiry(der));
        PeerSummary {
            version: version_name(self.conn.protocol_version()),
            cipher: self
                .conn
                .negotiated_cipher_suite()
                .and_then(|s| s.suite().as_str())
                .unwrap_or("unknown")
                .to_string(),
            subject: certificate.as_ref().map(|(subject, _)| subject.clone()),
            not_after: certificate.map(|(_, not_after)| not_after),
        }
    }

    /// [`Handshake::advance`] to the end on a socket of a blocking caller (`pipe`): polls
    /// the socket until `deadline` passes. EINTR on a signal (the caller judges it).
    pub fn complete(&mut self, fd: BorrowedFd<'_>, limit: Duration) -> Result<(), String> {
        let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
        let flags = sys::socket::set_nonblocking(raw)
            .map_err(|e| format!("TLS handshake: {}", io::Error::from(e)))?;
        let done = self.complete_nonblocking(fd, limit);
        let _ = nix::fcntl::fcntl(raw, nix::fcntl::FcntlArg::F_SETFL(flags));
        done
    }

    fn complete_nonblocking(&mut self, fd: BorrowedFd<'_>, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        while !self.advance(fd)? {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(stalled(limit));
            }
            let mut events = PollFlags::POLLIN;
            if self.conn.wants_write() {
                events |= PollFlags::POLLOUT;
            }
            let ms = PollTimeout::try_from(left.as_millis().min(60_000) as u32 + 1)
                .unwrap_or(PollTimeout::MAX);
            match poll(&mut [PollFd::new(fd, events)], ms) {
                Ok(_) | Err(Errno::EINTR) if !sys::process::interrupted() => {}
                Ok(_) => {}
                Err(e) => return Err(format!("TLS handshake: {}", io::Error::from(e))),
            }
            if sys::process::interrupted() {
                return Err("interrupted during the TLS handshake".to_string());
            }
        }
        Ok(())
    }

    /// The handshake is complete: the kernel takes the record layer where it can (the fd
    /// is the TCP socket itself), else the bridge's thread does (the fd is its socketpair's
    /// end) or, `in_loop` (the relay), [`Records`] in the caller's own loop (the fd is the
    /// TCP socket). Err only when kTLS took the keys and then failed: the stream is lost.
    pub fn establish(self, tcp: OwnedFd, in_loop: bool) -> Result<(OwnedFd, Session), String> {
        let mut info = TlsInfo {
            version: version_name(self.conn.protocol_version()),
            cipher: self
                .conn
                .negotiated_cipher_suite()
                .and_then(|s| s.suite().as_str())
                .unwrap_or("unknown")
                .to_string(),
            sni: match &self.conn {
                Connection::Server(server) => server.server_name().map(str::to_string),
                Connection::Client(_) => self.sni.clone(),
            },
            alpn: self
                .conn
                .alpn_protocol()
                .map(|p| String::from_utf8_lossy(p).into_owned()),
            peer_subject: match &self.conn {
                Connection::Server(server) => server
                    .peer_certificates()
                    .and_then(|chain| chain.first())
                    .and_then(|cert| trust::subject(cert.as_ref())),
                Connection::Client(_) => None,
            },
            kernel: Err(Errno::ENOENT),
        };
        match offload(self.conn, tcp.as_fd(), &info) {
            Offload::Kernel => {
                info.kernel = Ok(());
                Ok((
                    tcp,
                    Session {
                        info,
                        bridge: None,
                        records: None,
                    },
                ))
            }
            Offload::Refused(errno, conn) if in_loop => {
                info.kernel = Err(errno);
                Ok((
                    tcp,
                    Session {
                        info,
                        bridge: None,
                        records: Some(Records::new(*conn)),
                    },
                ))
            }
            Offload::Refused(errno, conn) => {
                info.kernel = Err(errno);
                // The engine's end blocks, or not, as the socket it stands for did.
                let nonblocking = nix::fcntl::fcntl(
                    std::os::fd::AsRawFd::as_raw_fd(&tcp),
                    nix::fcntl::FcntlArg::F_GETFL,
                )
                .map(|f| {
                    nix::fcntl::OFlag::from_bits_retain(f).contains(nix::fcntl::OFlag::O_NONBLOCK)
                })
                .unwrap_or(false);
                let (local, bridge) = bridge::start(*conn, tcp, nonblocking)
                    .map_err(|e| format!("TLS: cannot start its record layer: {e}"))?;
                Ok((
                    local,
                    Session {
                        info,
                        bridge: Some(bridge),
                        records: None,
                    },
                ))
            }
            Offload::Failed(reason) => Err(reason),
        }
    }
}

/// A completed handshake as `probe` reports it.
#[derive(Debug, Clone)]
pub struct PeerSummary {
    /// "TLSv1.3" or "TLSv1.2".
    pub version: &'static str,
    pub cipher: String,
    /// The end-entity certificate's subject ("CN=localhost").
    pub subject: Option<String>,
    /// When it expires: "2027-11-26 22:59:12 UTC".
    pub not_after: Option<String>,
}

/// Which end of the handshake zerocat is on this connection.
fn we(conn: &Connection) -> We {
    match conn {
        Connection::Client(_) => We::Client,
        Connection::Server(_) => We::Server,
    }
}

/// A record layer's error, as a sentence ([`trust::explain`]).
fn failure(conn: &Connection, e: &rustls::Error) -> String {
    format!("TLS: {}", explain(e, we(conn)))
}

/// The peer closed the TCP connection before the handshake was done.
fn closed_in_handshake(we: We) -> String {
    match we {
        We::Client => "TLS handshake: the server closed the connection before the handshake \
                       was done: is that port TLS (a plain one is tcp:), and does it want a \
                       client certificate (,cert=PEM,key=PEM)?"
            .to_string(),
        We::Server => "TLS handshake: the client closed the connection before the handshake \
                       was done: it may have refused this listener's certificate (give it the \
                       CA: zerocat ,cafile=, curl --cacert)"
            .to_string(),
    }
}

/// What a handshake that did not finish in time says.
pub fn stalled(limit: Duration) -> String {
    format!(
        "TLS handshake not complete within {:.3} s",
        limit.as_secs_f64()
    )
}

fn version_name(version: Option<ProtocolVersion>) -> &'static str {
    match version {
        Some(ProtocolVersion::TLSv1_3) => "TLSv1.3",
        Some(ProtocolVersion::TLSv1_2) => "TLSv1.2",
        _ => "TLS",
    }
}

fn wire_version(name: &str) -> u16 {
    match name {
        "TLSv1.3" => ktls::TLS_1_3,
        _ => ktls::TLS_1_2,
    }
}

enum Offload {
    Kernel,
    /// The kernel would not take it, before any key left rustls: rustls goes on.
    Refused(Errno, Box<Connection>),
    Failed(String),
}

/// Hands the record layer to the kernel: the suite must be one the kernel implements, the
/// socket must take the `tls` ULP (ENOENT where the kernel has no `tls` module, as here),
/// and rustls must hold no bytes of the stream yet (they would be lost to the kernel:
/// EBUSY). Each refusal comes before a key leaves rustls, so rustls carries on; a failure
/// after that loses the stream and is an error.
fn offload(mut conn: Connection, fd: BorrowedFd<'_>, info: &TlsInfo) -> Offload {
    let version = wire_version(info.version);
    let cipher = match ktls::cipher_or_refusal(version, &info.cipher) {
        Ok(cipher) => cipher,
        Err(errno) => return Offload::Refused(errno, Box::new(conn)),
    };
    if let Err(errno) = ktls::attach_tls_ulp(fd) {
        return Offload::Refused(errno, Box::new(conn));
    }
    // Attached without keys, the socket still passes bytes through: rustls may go on.
    match conn.process_new_packets() {
        Ok(state) if state.plaintext_bytes_to_read() == 0 => {}
        _ => return Offload::Refused(Errno::EBUSY, Box::new(conn)),
    }
    let secrets = match conn.dangerous_extract_secrets() {
        Ok(secrets) => secrets,
        Err(e) => return Offload::Failed(format!("kTLS: cannot take the keys: {e}")),
    };
    for (direction, (seq, secret)) in [
        (ktls::Direction::Send, secrets.tx),
        (ktls::Direction::Receive, secrets.rx),
    ] {
        let (key, iv) = match &secret {
            rustls::ConnectionTrafficSecrets::Aes128Gcm { key, iv }
            | rustls::ConnectionTrafficSecrets::Aes256Gcm { key, iv }
            | rustls::ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
                (key.as_ref().to_vec(), iv.as_ref().to_vec())
            }
            _ => return Offload::Failed("kTLS: a key of an unknown kind".to_string()),
        };
        let handed = ktls::crypto_info(version, cipher, &key, &iv, seq)
            .and_then(|bytes| ktls::hand_keys(fd, direction, &bytes));
        if let Err(errno) = handed {
            return Offload::Failed(format!(
                "kTLS refused the {direction:?} key after the handshake ({errno:?})"
            ));
        }
    }
    Offload::Kernel
}

/// An established TLS stream: what it negotiated, and its record layer when rustls carries
/// it (a thread of its own, or [`Records`] for the caller's loop).
pub struct Session {
    pub info: TlsInfo,
    bridge: Option<bridge::Bridge>,
    records: Option<Records>,
}

impl Session {
    /// The record layer's error so far: a bad record, an alert, a stream the peer ended
    /// without close_notify. Set before the bridge ends its side of the socketpair, so an
    /// EOF the engine reads from it is already explained here.
    pub fn error(&self) -> Option<String> {
        match &self.records {
            Some(records) => records.error().map(str::to_string),
            None => self.bridge.as_ref().and_then(|b| b.error()),
        }
    }

    /// The caller's loop carries the records ([`Records`]).
    pub fn in_loop(&self) -> bool {
        self.records.is_some()
    }

    /// The record layer the caller's loop runs, when it does (the relay's userspace TLS).
    pub fn records(&mut self) -> Option<&mut Records> {
        self.records.as_mut()
    }

    /// The stream was cut (an error, a signal): the peer gets a reset when the engine's end
    /// closes, not a close_notify. Call before closing it.
    pub fn cut(&self) {
        if let Some(bridge) = &self.bridge {
            bridge.cut();
        }
    }

    /// The engine only writes this stream (a sink of `pipe` or `tee`): the peer's FIN
    /// after zerocat's close_notify is then a clean end ([`bridge::Bridge::writes_only`]).
    /// The kernel's record layer reads nothing from the peer for a sink, so it needs no word.
    pub fn writes_only(&self) {
        if let Some(bridge) = &self.bridge {
            bridge.writes_only();
        }
    }

    /// For a WebSocket inside: the mark its peer's close frame sets, after which a FIN
    /// without close_notify is no error ([`bridge::InnerEnd`]). None under kTLS, where
    /// the reads of the WebSocket itself meet that FIN.
    pub fn inner_end(&self) -> Option<bridge::InnerEnd> {
        self.bridge.as_ref().map(bridge::Bridge::inner_end)
    }

    /// After the engine closed its end: waits for the record layer to send what it holds
    /// and its close_notify (at most `limit`), then says its error, if any.
    pub fn finish(self, limit: Duration) -> Option<String> {
        self.bridge.and_then(|b| b.join(limit))
    }
}

/// The record layer in the relay's own event loop, where the kernel has none: rustls
/// decrypts from the TCP socket into a direction's buffer ([`Records::read`]) and encrypts
/// the other direction's buffer into it ([`Records::write`]); no thread, no socketpair. The
/// relay's flows call these in place of read(2)/write(2) on a TLS side.
pub struct Records {
    conn: Connection,
    /// Why the stream failed (a bad record, an alert, a cut without close_notify): the
    /// flow saw EPROTO, the report says this.
    error: Option<String>,
    /// close_notify is queued.
    closing: bool,
    /// Plaintext taken into records some of which still wait for the socket: not
    /// delivered yet (the peer cannot read a byte of them before they are sent).
    unsent: usize,
    /// Plaintext whose records all went to the socket, not yet collected by
    /// [`Records::take_sent`].
    sent: usize,
}

impl Records {
    fn new(mut conn: Connection) -> Records {
        // Records of a whole 256 KiB buffer queued at once: one writev, not four.
        conn.set_buffer_limit(Some(512 * 1024));
        Records {
            conn,
            error: None,
            closing: false,
            unsent: 0,
            sent: 0,
        }
    }

    fn fail<T>(&mut self, reason: String) -> Result<T, Errno> {
        // The alert rustls queued, if any, goes with the next flush.
        self.error.get_or_insert(format!("TLS: {reason}"));
        Err(Errno::EPROTO)
    }

    /// Plaintext into `buf`, as much as rustls and the socket have now: Ok(0) at the
    /// peer's close_notify; EAGAIN only when the socket said so and rustls holds nothing
    /// (so an edge-triggered loop is right to wait); EPROTO when the stream failed
    /// ([`Records::error`] says how: a TCP EOF without close_notify is one).
    pub fn read(&mut self, fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<usize, Errno> {
        let mut total = 0;
        loop {
            match self.conn.reader().read(&mut buf[total..]) {
                Ok(0) => return Ok(total), // close_notify (or a full buffer)
                Ok(n) => {
                    total += n;
                    if total == buf.len() {
                        return Ok(total);
                    }
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    if total > 0 {
                        return Ok(total);
                    }
                    return self.fail(TRUNCATED.to_string());
                }
                Err(e) => return self.fail(e.to_string()),
            }
            // Records rustls holds but has not decrypted yet (its plaintext was full).
            match self.conn.process_new_packets() {
                Ok(state) if state.plaintext_bytes_to_read() > 0 => continue,
                Ok(_) => {}
                Err(e) => return self.fail(explain(&e, we(&self.conn))),
            }
            match self.conn.read_tls(&mut FdIo(fd)) {
                Ok(n) => {
                    if let Err(e) = self.conn.process_new_packets() {
                        return self.fail(explain(&e, we(&self.conn)));
                    }
                    if n == 0 {
                        // TCP EOF: the reader now says close_notify (Ok(0)) or a cut.
                        return match self.conn.reader().read(&mut buf[total..]) {
                            Ok(n) => Ok(total + n),
                            Err(_) if total > 0 => Ok(total),
                            Err(_) => self.fail(TRUNCATED.to_string()),
                        };
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return if total > 0 {
                        Ok(total)
                    } else {
                        Err(Errno::EAGAIN)
                    };
                }
                Err(e) if total > 0 => {
                    let _ = e;
                    return Ok(total);
                }
                Err(e) => return Err(errno_of(&e)),
            }
        }
    }

    /// Plaintext from `buf` into records, sent as far as the socket takes them: Ok(n)
    /// taken (delivered only once [`Records::take_sent`] says so); EAGAIN when records
    /// from before still wait for the socket.
    pub fn write(&mut self, fd: BorrowedFd<'_>, buf: &[u8]) -> Result<usize, Errno> {
        self.flush(fd)?;
        let n = self.conn.writer().write(buf).map_err(|e| errno_of(&e))?;
        self.unsent += n;
        match self.flush(fd) {
            Ok(()) | Err(Errno::EAGAIN) => Ok(n),
            Err(errno) => Err(errno),
        }
    }

    /// Records waiting for the socket (a write's tail, an alert, a key update's answer,
    /// close_notify).
    pub fn pending(&self) -> bool {
        self.conn.wants_write()
    }

    /// Sends what waits: Ok once all went, EAGAIN when the socket is full.
    pub fn flush(&mut self, fd: BorrowedFd<'_>) -> Result<(), Errno> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut FdIo(fd)) {
                Ok(_) => {}
                Err(e) => return Err(errno_of(&e)),
            }
        }
        // Every record is on the socket: the plaintext they carry is delivered. (rustls
        // does not say which plaintext a partly sent queue carries, so none of it counts
        // until the queue is empty; each write waits for that, so nothing lags behind.)
        self.sent += std::mem::take(&mut self.unsent);
        Ok(())
    }

    /// Plaintext delivered since the last call: its records all went to the socket.
    pub fn take_sent(&mut self) -> usize {
        std::mem::take(&mut self.sent)
    }

    /// Plaintext taken into records that have not all gone to the socket: undelivered if
    /// the connection ends now.
    pub fn unsent(&self) -> usize {
        self.unsent
    }

    /// The direction into this side ended: close_notify is queued (once).
    pub fn close(&mut self) {
        if !self.closing {
            self.closing = true;
            self.conn.send_close_notify();
        }
    }

    /// Why the stream failed, if it did.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }
}

const TRUNCATED: &str =
    "the peer closed the connection without close_notify (the stream may be truncated)";

/// The errno behind an I/O error of rustls' reads and writes (EIO when it has none).
fn errno_of(e: &io::Error) -> Errno {
    if e.kind() == io::ErrorKind::WouldBlock {
        return Errno::EAGAIN;
    }
    e.raw_os_error().map(Errno::from_raw).unwrap_or(Errno::EIO)
}
