//! Kernel TLS (kTLS): after a TLS handshake done in userspace, the kernel can take the
//! record layer of a TCP socket (attach the `tls` upper-layer protocol, then hand it each
//! direction's key, IV and record sequence), so splice/sendfile carry TLS traffic. This file
//! holds the setsockopts and the pure decisions around them: which negotiated ciphers the
//! kernel could take, and which refusals mean "stay in userspace". No byte of the stream
//! moves in any of these calls, so every refusal before a direction is handed over is a
//! fallback, never a failure (the bytes-are-sacred rule: only an error before any byte moved
//! may fall back).

use std::os::fd::{AsRawFd, BorrowedFd};

use nix::errno::Errno;
use nix::libc;

/// Where the kernel lists the upper-layer protocols it can attach to a TCP socket.
pub const AVAILABLE_ULP: &str = "/proc/sys/net/ipv4/tcp_available_ulp";

/// `TLS_1_2_VERSION` and `TLS_1_3_VERSION` of <linux/tls.h>: the wire versions.
pub const TLS_1_2: u16 = 0x0303;
pub const TLS_1_3: u16 = 0x0304;

/// A cipher the kernel's record layer implements (`TLS_CIPHER_*` of <linux/tls.h>), with
/// the sizes of its `tls12_crypto_info_*` fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelCipher {
    AesGcm128,
    AesGcm256,
    Chacha20Poly1305,
}

impl KernelCipher {
    /// The `cipher_type` the kernel's crypto info carries.
    pub fn cipher_type(self) -> u16 {
        match self {
            KernelCipher::AesGcm128 => 51,
            KernelCipher::AesGcm256 => 52,
            KernelCipher::Chacha20Poly1305 => 54,
        }
    }

    /// Bytes of `(iv, key, salt, rec_seq)` in the kernel's crypto info for this cipher: the
    /// explicit IV and the salt together are the 12-byte nonce base TLS derives.
    pub fn field_sizes(self) -> (usize, usize, usize, usize) {
        match self {
            KernelCipher::AesGcm128 => (8, 16, 4, 8),
            KernelCipher::AesGcm256 => (8, 32, 4, 8),
            KernelCipher::Chacha20Poly1305 => (12, 32, 0, 8),
        }
    }
}

/// The kernel cipher that serves a negotiated suite (its IANA name, as rustls spells it),
/// or None when the kernel has no record layer for it. Only TLS 1.2 and 1.3 are ever
/// negotiated; a suite of another version is None too.
pub fn kernel_cipher(version: u16, suite: &str) -> Option<KernelCipher> {
    let tls13 = match version {
        TLS_1_3 => true,
        TLS_1_2 => false,
        _ => return None,
    };
    if tls13 != suite.starts_with("TLS13_") {
        return None;
    }
    if suite.ends_with("AES_128_GCM_SHA256") {
        Some(KernelCipher::AesGcm128)
    } else if suite.ends_with("AES_256_GCM_SHA384") {
        Some(KernelCipher::AesGcm256)
    } else if suite.ends_with("CHACHA20_POLY1305_SHA256") {
        Some(KernelCipher::Chacha20Poly1305)
    } else {
        None
    }
}

/// The kernel cipher for a negotiated suite, or EOPNOTSUPP (what the kernel says of a
/// cipher it lacks) so the report names a refusal without a setsockopt.
pub fn cipher_or_refusal(version: u16, suite: &str) -> Result<KernelCipher, Errno> {
    kernel_cipher(version, suite).ok_or(Errno::EOPNOTSUPP)
}

/// The direction whose key is handed to the kernel (`TLS_TX`, `TLS_RX` of <linux/tls.h>).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Send,
    Receive,
}

impl Direction {
    fn option(self) -> libc::c_int {
        match self {
            Direction::Send => 1,
            Direction::Receive => 2,
        }
    }
}

/// The bytes of a `tls12_crypto_info_*` for one direction: the header (version and cipher
/// type, native endian), then iv, key, salt and the record sequence (big endian, as on the
/// wire). `nonce` is the 12-byte IV TLS derives (what rustls' extracted secrets call `iv`):
/// for AES-GCM its first 4 bytes are the kernel's salt and the last 8 its iv; ChaCha20 takes
/// all 12 as iv. EINVAL when a key or nonce has the wrong length for the cipher.
pub fn crypto_info(
    version: u16,
    cipher: KernelCipher,
    key: &[u8],
    nonce: &[u8],
    seq: u64,
) -> Result<Vec<u8>, Errno> {
    let (iv_len, key_len, salt_len, seq_len) = cipher.field_sizes();
    if key.len() != key_len || nonce.len() != iv_len + salt_len {
        return Err(Errno::EINVAL);
    }
    let (salt, iv) = nonce.split_at(salt_len);
    let mut info = Vec::with_capacity(4 + iv_len + key_len + salt_len + seq_len);
    info.extend_from_slice(&version.to_ne_bytes());
    info.extend_from_slice(&cipher.cipher_type().to_ne_bytes());
    info.extend_from_slice(iv);
    info.extend_from_slice(key);
    info.extend_from_slice(salt);
    info.extend_from_slice(&seq.to_be_bytes());
    Ok(info)
}

/// setsockopt(SOL_TLS, TLS_TX or TLS_RX, `info`): hands one direction's record layer to
/// the kernel, on a socket with the `tls` ULP attached. Without it the socket answers
/// ENOPROTOOPT and is unchanged.
pub fn hand_keys(fd: BorrowedFd<'_>, direction: Direction, info: &[u8]) -> Result<(), Errno> {
    loop {
        // SAFETY: the kernel reads info.len() bytes from a valid slice.
        let ret = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_TLS,
                direction.option(),
                info.as_ptr().cast(),
                info.len() as libc::socklen_t,
            )
        };
        match Errno::result(ret) {
            Err(Errno::EINTR) => {}
            other => return other.map(drop),
        }
    }
}

/// Whether the kernel lists `tls` among its upper-layer protocols (a kernel built with
/// CONFIG_TLS and the module loaded; `modprobe tls` loads it). Unreadable means no.
pub fn ulp_offered() -> bool {
    std::fs::read_to_string(AVAILABLE_ULP)
        .map(|list| list.split_whitespace().any(|ulp| ulp == "tls"))
        .unwrap_or(false)
}

/// setsockopt(IPPROTO_TCP, TCP_ULP, "tls") on a connected TCP socket, retrying EINTR.
/// ENOENT: the kernel has no `tls` module (as on the machines here); ENOPROTOOPT: no
/// TCP_ULP at all; EEXIST: another ULP is attached. Each leaves the socket as it was, so
/// the stream stays with userspace TLS and the report names the errno. Once attached and
/// before a direction's key is handed over (SOL_TLS TLS_TX/TLS_RX), the socket passes
/// bytes through unchanged, so each direction's refusal stands on its own.
pub fn attach_tls_ulp(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    const NAME: &[u8] = b"tls";
    loop {
        // SAFETY: the kernel reads NAME.len() bytes from a valid static buffer.
        let ret = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_ULP,
                NAME.as_ptr().cast(),
                NAME.len() as libc::socklen_t,
            )
        };
        match Errno::result(ret) {
            Err(Errno::EINTR) => {}
            other => return other.map(drop),
        }
    }
}

/// What a TLS endpoint negotiated and which record layer carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsInfo {
    /// "TLSv1.3" or "TLSv1.2".
    pub version: &'static str,
    /// The IANA name rustls gives the suite: "TLS13_AES_256_GCM_SHA384".
    pub cipher: String,
    /// The name the client sent (SNI), if any.
    pub sni: Option<String>,
    pub alpn: Option<String>,
    /// A listener's: the subject of the certificate the client presented, if any
    /// (`CN=client, O=Example`).
    pub peer_subject: Option<String>,
    /// Ok: the kernel carries the records (kTLS); Err: rustls does, and the errno of the
    /// kernel's refusal.
    pub kernel: Result<(), Errno>,
}

impl TlsInfo {
    /// "TLSv1.3 TLS13_AES_256_GCM_SHA384, sni localhost, userspace (tls) (kTLS: ENOENT)".
    pub fn describe(&self) -> String {
        let mut s = format!("{} {}", self.version, self.cipher);
        // Printable as they are: rustls takes an SNI only as a valid DNS name, and a
        // protocol only from the listener's own alpn= list.
        if let Some(sni) = &self.sni {
            s.push_str(&format!(", sni {sni}"));
        }
        if let Some(alpn) = &self.alpn {
            s.push_str(&format!(", alpn {alpn}"));
        }
        match self.kernel {
            Ok(()) => s.push_str(", ktls"),
            Err(errno) => s.push_str(&format!(", userspace (tls) (kTLS: {errno:?})")),
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    #[test]
    fn rustls_suites_map_to_kernel_ciphers() {
        for (version, suite, cipher) in [
            (TLS_1_3, "TLS13_AES_128_GCM_SHA256", KernelCipher::AesGcm128),
            (TLS_1_3, "TLS13_AES_256_GCM_SHA384", KernelCipher::AesGcm256),
            (
                TLS_1_3,
                "TLS13_CHACHA20_POLY1305_SHA256",
                KernelCipher::Chacha20Poly1305,
            ),
            (
                TLS_1_2,
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                KernelCipher::AesGcm128,
            ),
            (
                TLS_1_2,
                "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
                KernelCipher::AesGcm256,
            ),
            (
                TLS_1_2,
                "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
                KernelCipher::Chacha20Poly1305,
            ),
        ] {
            assert_eq!(kernel_cipher(version, suite), Some(cipher), "{suite}");
            assert_eq!(cipher_or_refusal(version, suite), Ok(cipher));
        }
    }

    #[test]
    fn suites_the_kernel_lacks_or_of_the_wrong_version_are_refused() {
        for (version, suite) in [
            (TLS_1_2, "TLS_RSA_WITH_AES_128_CBC_SHA"),
            (TLS_1_3, "TLS13_AES_128_CCM_8_SHA256"),
            // A TLS 1.3 suite reported under 1.2 (or the reverse) is a confusion, not a key.
            (TLS_1_2, "TLS13_AES_128_GCM_SHA256"),
            (TLS_1_3, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"),
            // TLS 1.1 and older are never negotiated.
            (0x0302, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"),
        ] {
            assert_eq!(kernel_cipher(version, suite), None, "{version:#x} {suite}");
            assert_eq!(cipher_or_refusal(version, suite), Err(Errno::EOPNOTSUPP));
        }
    }

    #[test]
    fn crypto_info_sizes_match_linux_tls_h() {
        // sizeof(struct tls12_crypto_info_*) = 4 (version, cipher_type) + the fields.
        let size = |c: KernelCipher| {
            let (iv, key, salt, seq) = c.field_sizes();
            4 + iv + key + salt + seq
        };
        assert_eq!(size(KernelCipher::AesGcm128), 40);
        assert_eq!(size(KernelCipher::AesGcm256), 56);
        assert_eq!(size(KernelCipher::Chacha20Poly1305), 56);
        // The nonce base TLS derives is 12 bytes for all three.
        for c in [
            KernelCipher::AesGcm128,
            KernelCipher::AesGcm256,
            KernelCipher::Chacha20Poly1305,
        ] {
            let (iv, _, salt, _) = c.field_sizes();
            assert_eq!(iv + salt, 12, "{c:?}");
        }
    }

    /// Where the kernel has no `tls` ULP (this machine: only mptcp), attaching it to a
    /// connected loopback socket says ENOENT: the errno the userspace fallback reports.
    #[test]
    fn attaching_the_ulp_where_the_kernel_lacks_it_says_enoent() {
        if ulp_offered() {
            eprintln!("SKIP: this kernel offers the tls ULP ({AVAILABLE_ULP}); no refusal to see");
            return;
        }
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_server, _) = listener.accept().unwrap();
        let errno = attach_tls_ulp(client.as_fd()).unwrap_err();
        assert_eq!(errno, Errno::ENOENT, "{AVAILABLE_ULP} does not list tls");
    }

    #[test]
    fn crypto_info_lays_out_the_nonce_key_and_sequence_as_linux_tls_h() {
        let key: Vec<u8> = (0..16).collect();
        let nonce: Vec<u8> = (100..112).collect();
        let info = crypto_info(TLS_1_3, KernelCipher::AesGcm128, &key, &nonce, 7).unwrap();
        assert_eq!(info.len(), 40);
        assert_eq!(&info[..2], &TLS_1_3.to_ne_bytes());
        assert_eq!(&info[2..4], &51u16.to_ne_bytes());
        assert_eq!(&info[4..12], &nonce[4..], "iv: the nonce after the salt");
        assert_eq!(&info[12..28], &key[..]);
        assert_eq!(
            &info[28..32],
            &nonce[..4],
            "salt: the nonce's first 4 bytes"
        );
        assert_eq!(&info[32..], &7u64.to_be_bytes());

        let key: Vec<u8> = (0..32).collect();
        let info = crypto_info(TLS_1_2, KernelCipher::Chacha20Poly1305, &key, &nonce, 1).unwrap();
        assert_eq!(info.len(), 56);
        assert_eq!(
            &info[4..16],
            &nonce[..],
            "ChaCha20: the whole nonce is the iv"
        );
        assert_eq!(&info[16..48], &key[..]);
        assert_eq!(&info[48..], &1u64.to_be_bytes());

        assert_eq!(
            crypto_info(TLS_1_3, KernelCipher::AesGcm256, &key[..16], &nonce, 0),
            Err(Errno::EINVAL),
            "a 128-bit key for AES-256"
        );
        assert_eq!(
            crypto_info(TLS_1_3, KernelCipher::AesGcm128, &key[..16], &nonce[..8], 0),
            Err(Errno::EINVAL),
            "a short nonce"
        );
    }

    /// A key handed to a socket without the `tls` ULP is refused and moves nothing: the
    /// socket still carries plain bytes both ways afterwards.
    #[test]
    fn keys_handed_without_the_ulp_are_refused_and_the_socket_is_unchanged() {
        use std::io::{Read, Write};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let info = crypto_info(TLS_1_3, KernelCipher::AesGcm128, &[1; 16], &[2; 12], 0).unwrap();
        for direction in [Direction::Send, Direction::Receive] {
            assert_eq!(
                hand_keys(client.as_fd(), direction, &info),
                Err(Errno::ENOPROTOOPT),
                "{direction:?}"
            );
        }
        client.write_all(b"plain").unwrap();
        let mut got = [0u8; 5];
        server.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"plain");
    }
}
