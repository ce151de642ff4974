//! How a `tls:` client trusts the server's certificate, and what a person reads when it
//! does not. webpki checks the chain against `cafile=` (or the system's roots); a
//! certificate that is itself in `cafile=` is trusted as that certificate (a self-signed
//! one made by `openssl req -x509`, CA:TRUE by OpenSSL 3's default, which webpki refuses
//! as an end-entity), and `pin=sha256:HEX` names the one certificate to take. Either way
//! the name and the dates are still checked. Every refusal is a sentence with the next
//! step ([`explain`]), never rustls' Debug text.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::DistinguishedName;
use rustls::{
    AlertDescription, CertificateError, DigitallySignedStruct, OtherError, SignatureScheme,
};

use crate::units::hex;

/// How the server's certificate is checked.
#[derive(Debug)]
pub struct ServerCheck {
    provider: Arc<CryptoProvider>,
    trust: Trust,
}

#[derive(Debug)]
enum Trust {
    /// `verify=0`: any certificate (the handshake's signatures are still checked: the
    /// peer holds the key of the certificate it showed, whoever it is).
    Anything,
    Verified {
        /// webpki over `cafile=` or the system's roots; None with `pin=` alone.
        webpki: Option<Arc<WebPkiServerVerifier>>,
        /// `cafile=`'s certificates: each trusted as itself when the server presents it.
        own: Vec<CertificateDer<'static>>,
        /// `pin=`: the SHA-256 of the server certificate's DER.
        pin: Option<[u8; 32]>,
    },
}

impl ServerCheck {
    pub fn anything(provider: Arc<CryptoProvider>) -> ServerCheck {
        ServerCheck {
            provider,
            trust: Trust::Anything,
        }
    }

    pub fn verified(
        provider: Arc<CryptoProvider>,
        webpki: Option<Arc<WebPkiServerVerifier>>,
        own: Vec<CertificateDer<'static>>,
        pin: Option<[u8; 32]>,
    ) -> ServerCheck {
        ServerCheck {
            provider,
            trust: Trust::Verified { webpki, own, pin },
        }
    }
}

/// The subject of a DER certificate as `openssl x509 -subject` names it in RFC 4514 order
/// (`CN=client, O=Example`); None when it does not parse.
pub fn subject(cert: &[u8]) -> Option<String> {
    use x509_parser::prelude::{FromDer, X509Certificate};
    let (_, parsed) = X509Certificate::from_der(cert).ok()?;
    Some(parsed.subject().to_string())
}

/// The SHA-256 of a certificate's DER: what `pin=` names (as LibreSSL nc's `-H` and
/// `openssl x509 -noout -fingerprint -sha256` hash: the whole certificate).
pub fn certificate_sha256(cert: &[u8]) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, cert);
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

/// The server's certificate is not the one `pin=` names.
#[derive(Debug)]
struct PinMismatch {
    presented: [u8; 32],
}

impl std::fmt::Display for PinMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the certificate's SHA-256 is {}", hex(&self.presented))
    }
}

impl std::error::Error for PinMismatch {}

impl ServerCertVerifier for ServerCheck {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Trust::Verified { webpki, own, pin } = &self.trust else {
            return Ok(ServerCertVerified::assertion());
        };
        if let Some(pin) = pin {
            let presented = certificate_sha256(end_entity);
            if presented != *pin {
                return Err(rustls::Error::InvalidCertificate(CertificateError::Other(
                    OtherError(Arc::new(PinMismatch { presented })),
                )));
            }
        }
        let Some(webpki) = webpki else {
            // pin= alone: the pin is the trust; the name and dates are still checked.
            trusted_as_itself(end_entity, Role::Server(server_name), now)?;
            return Ok(ServerCertVerified::assertion());
        };
        match webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Ok(verified) => Ok(verified),
            // Whatever webpki said (CaUsedAsEndEntity for a CA:TRUE self-signed one,
            // UnknownIssuer for one whose issuer is not there): the very certificate the
            // user gave is trusted as that certificate, and judged on its name and dates.
            Err(_) if own.iter().any(|c| c.as_ref() == end_entity.as_ref()) => {
                trusted_as_itself(end_entity, Role::Server(server_name), now)?;
                Ok(ServerCertVerified::assertion())
            }
            Err(e) => Err(e),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A listener's check of client certificates (`cafile=`): webpki over `cafile=`'s CAs, and,
/// as for a client's check of servers, a certificate that is itself in `cafile=` trusted
/// as that certificate (a self-signed client certificate of `openssl req -x509`).
#[derive(Debug)]
pub struct ClientCheck {
    webpki: Arc<dyn ClientCertVerifier>,
    own: Vec<CertificateDer<'static>>,
}

impl ClientCheck {
    pub fn new(webpki: Arc<dyn ClientCertVerifier>, own: Vec<CertificateDer<'static>>) -> Self {
        ClientCheck { webpki, own }
    }
}

impl ClientCertVerifier for ClientCheck {
    fn offer_client_auth(&self) -> bool {
        self.webpki.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.webpki.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.webpki.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        match self
            .webpki
            .verify_client_cert(end_entity, intermediates, now)
        {
            Ok(verified) => Ok(verified),
            Err(_) if self.own.iter().any(|c| c.as_ref() == end_entity.as_ref()) => {
                trusted_as_itself(end_entity, Role::Client, now)?;
                Ok(ClientCertVerified::assertion())
            }
            Err(e) => Err(e),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// What a certificate trusted as itself is checked for.
enum Role<'a> {
    /// A server's, for this name.
    Server(&'a ServerName<'a>),
    /// A client's: no name.
    Client,
}

/// A certificate trusted as itself (in `cafile=`, or pinned): no chain to build, but it
/// must be valid now, for a server's name, and (when it says what it is for) for its role.
/// The name is checked by webpki against the subjectAltName's DNS and IP entries; a
/// certificate with none (`openssl req -x509 -subj /CN=NAME` makes one) is checked against
/// its subject's CN, as curl and OpenSSL do. x509-parser reads the dates, the CN and the
/// extensions, which webpki checks only while building a chain and does not expose.
fn trusted_as_itself(
    end_entity: &CertificateDer<'_>,
    role: Role<'_>,
    now: UnixTime,
) -> Result<(), rustls::Error> {
    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
    let bad = || rustls::Error::InvalidCertificate(CertificateError::BadEncoding);
    let (_, cert) = X509Certificate::from_der(end_entity.as_ref()).map_err(|_| bad())?;
    let validity = cert.validity();
    let at = |t: i64| UnixTime::since_unix_epoch(std::time::Duration::from_secs(t.max(0) as u64));
    let (not_before, not_after) = (
        validity.not_before.timestamp(),
        validity.not_after.timestamp(),
    );
    let seconds = now.as_secs() as i64;
    if seconds < not_before {
        return Err(CertificateError::NotValidYetContext {
            time: now,
            not_before: at(not_before),
        }
        .into());
    }
    if seconds > not_after {
        return Err(CertificateError::ExpiredContext {
            time: now,
            not_after: at(not_after),
        }
        .into());
    }
    if let Ok(Some(eku)) = cert.extended_key_usage() {
        let fits = match role {
            Role::Server(_) => eku.value.server_auth,
            Role::Client => eku.value.client_auth,
        };
        if !eku.value.any && !fits {
            return Err(CertificateError::InvalidPurpose.into());
        }
    }
    let Role::Server(server_name) = role else {
        return Ok(());
    };
    let san_names = match cert.subject_alternative_name() {
        Ok(Some(san)) => san
            .value
            .general_names
            .iter()
            .filter(|n| matches!(n, GeneralName::DNSName(_) | GeneralName::IPAddress(_)))
            .count(),
        Ok(None) => 0,
        Err(_) => return Err(bad()),
    };
    if san_names > 0 {
        let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
        return rustls::client::verify_server_name(&parsed, server_name);
    }
    let common_names: Vec<String> = cert
        .subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok())
        .map(str::to_string)
        .collect();
    let wanted = match server_name {
        ServerName::DnsName(name) => Some(name.as_ref()),
        _ => None,
    };
    match wanted {
        Some(name) if common_names.iter().any(|cn| cn.eq_ignore_ascii_case(name)) => Ok(()),
        _ => Err(CertificateError::NotValidForNameContext {
            expected: server_name.to_owned(),
            presented: common_names.iter().map(|cn| format!("CN={cn}")).collect(),
        }
        .into()),
    }
}

/// Which end of the handshake zerocat is: the peer is then the server, or the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum We {
    Client,
    Server,
}

/// A TLS failure as a sentence a person can act on: what happened, then the next step.
pub fn explain(e: &rustls::Error, we: We) -> String {
    let peer = match we {
        We::Client => "the server",
        We::Server => "the client",
    };
    match e {
        rustls::Error::InvalidCertificate(cert) => certificate(cert, we),
        rustls::Error::AlertReceived(alert) => alert_received(*alert, we),
        rustls::Error::NoCertificatesPresented => match we {
            We::Server => "the client presented no certificate, and this listener's cafile= \
                           requires one; give the client a certificate from that CA \
                           (zerocat: ,cert=PEM,key=PEM; curl: --cert --key)"
                .to_string(),
            We::Client => "the server presented no certificate".to_string(),
        },
        rustls::Error::InvalidMessage(rustls::InvalidMessage::MessageTooLarge)
        | rustls::Error::PeerSentOversizedRecord => format!(
            "{peer} sent a record larger than TLS allows: it does not speak TLS, or the stream \
             is corrupt"
        ),
        rustls::Error::InvalidMessage(_)
        | rustls::Error::InappropriateMessage { .. }
        | rustls::Error::InappropriateHandshakeMessage { .. } => match we {
            We::Client => "what the server sent is not TLS: is that port plain TCP (then \
                           use tcp:), or another protocol?"
                .to_string(),
            We::Server => "what the client sent is not TLS: a plain TCP or HTTP client on \
                           a TLS port?"
                .to_string(),
        },
        rustls::Error::PeerIncompatible(why) => format!(
            "{peer} has no TLS parameters in common with zerocat ({}); zerocat speaks TLS 1.2 \
             and 1.3 with ECDHE and AES-GCM or ChaCha20-Poly1305",
            words(&format!("{why:?}"))
        ),
        rustls::Error::PeerMisbehaved(why) => format!(
            "{peer} broke the TLS protocol ({})",
            words(&format!("{why:?}"))
        ),
        rustls::Error::DecryptError => {
            format!("a record from {peer} did not decrypt: the stream was altered on the way")
        }
        rustls::Error::NoApplicationProtocol => {
            format!("{peer} takes none of the ALPN protocols offered; check alpn= on both ends")
        }
        rustls::Error::General(text) => text.clone(),
        other => words(&format!("{other:?}")),
    }
}

/// The certificate zerocat checked was refused (the server's, or a client's on a listener
/// with `cafile=`).
fn certificate(cert: &CertificateError, we: We) -> String {
    let whose = match we {
        We::Client => "the server's certificate",
        We::Server => "the client's certificate",
    };
    match cert {
        CertificateError::UnknownIssuer => match we {
            We::Client => format!(
                "{whose} is not signed by a CA in cafile= or the system store; give \
                 ,cafile=CA.pem (its CA, or that very certificate), ,pin=sha256:HEX, or \
                 ,verify=0 to skip checking"
            ),
            We::Server => format!(
                "{whose} is not signed by a CA in this listener's cafile=; give the client \
                 a certificate from one of those CAs, or add its CA to cafile="
            ),
        },
        CertificateError::NotValidForName => {
            format!("{whose} is not valid for name it was asked for; give ,sni=NAME with a name it carries")
        }
        CertificateError::NotValidForNameContext {
            expected,
            presented,
        } => {
            let expected = name_text(expected);
            let carries = if presented.is_empty() {
                "no name".to_string()
            } else {
                presented.join(", ")
            };
            format!(
                "{whose} is not valid for name '{expected}' (it carries {carries}); connect \
                 by a name it carries, or give ,sni=NAME with one of them"
            )
        }
        CertificateError::Expired => format!("{whose} has expired; renew it"),
        CertificateError::ExpiredContext { time, not_after } => format!(
            "{whose} expired on {} (this machine's clock says {}); renew it, or check the clock",
            utc(not_after),
            utc(time)
        ),
        CertificateError::NotValidYet => {
            format!("{whose} is not valid yet; check the clocks of both machines")
        }
        CertificateError::NotValidYetContext { time, not_before } => format!(
            "{whose} is not valid before {} (this machine's clock says {}); check the clocks \
             of both machines",
            utc(not_before),
            utc(time)
        ),
        CertificateError::BadSignature => format!(
            "{whose} chain has a bad signature: a certificate altered, or not signed by the \
             issuer it names"
        ),
        CertificateError::BadEncoding => format!("{whose} is not a readable X.509 certificate"),
        CertificateError::Revoked => format!("{whose} is revoked"),
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
            match we {
                We::Client => format!(
                    "{whose} is not for TLS servers (its extendedKeyUsage lacks serverAuth); \
                     issue it with extendedKeyUsage=serverAuth"
                ),
                We::Server => format!(
                    "{whose} is not for TLS clients (its extendedKeyUsage lacks clientAuth); \
                     issue it with extendedKeyUsage=clientAuth"
                ),
            }
        }
        CertificateError::Other(OtherError(inner)) => {
            if let Some(pin) = inner.downcast_ref::<PinMismatch>() {
                return format!(
                    "{whose} is not the one pin= names: its SHA-256 is {}; if the server's \
                     certificate was renewed, pin the new one (openssl x509 -in CERT.pem \
                     -noout -fingerprint -sha256)",
                    hex(&pin.presented)
                );
            }
            match inner.downcast_ref::<webpki::Error>() {
                Some(webpki::Error::CaUsedAsEndEntity) => match we {
                    We::Client => format!(
                        "{whose} is a CA certificate (basicConstraints CA:TRUE, as openssl req \
                         -x509 makes them) and is not itself in cafile=; give that very \
                         certificate as ,cafile=CERT.pem, or ,pin=sha256:HEX"
                    ),
                    We::Server => format!(
                        "{whose} is a CA certificate (basicConstraints CA:TRUE, as openssl req \
                         -x509 makes them) and is not itself in this listener's cafile=; add \
                         that very certificate to cafile="
                    ),
                },
                Some(webpki::Error::EndEntityUsedAsCa) => format!(
                    "{whose} is signed by a certificate that is no CA (basicConstraints \
                     CA:FALSE or none); give the CA that signed it as ,cafile=CA.pem"
                ),
                Some(other) => format!("{whose} was refused: {}", words(&format!("{other:?}"))),
                None => format!("{whose} was refused: {inner}"),
            }
        }
        other => format!("{whose} was refused: {}", words(&format!("{other:?}"))),
    }
}

/// Why rustls will not present a certificate of zerocat's own (`cert=`).
pub fn own_certificate(problem: &CertificateError) -> String {
    match problem {
        CertificateError::Other(OtherError(inner)) => match inner.downcast_ref::<webpki::Error>() {
            Some(webpki::Error::UnsupportedCertVersion) => {
                "it is an X.509 v1 certificate; make a v3 one (openssl adds extensions with \
                 -addext or -extfile)"
                    .to_string()
            }
            Some(other) => words(&format!("{other:?}")),
            None => inner.to_string(),
        },
        CertificateError::BadEncoding => "it is not a readable X.509 certificate".to_string(),
        other => words(&format!("{other:?}")),
    }
}

/// The peer refused the handshake (or the stream) with an alert.
fn alert_received(alert: AlertDescription, we: We) -> String {
    use AlertDescription as A;
    let name = alert_name(alert);
    match (we, alert) {
        (We::Client, A::CertificateRequired) => {
            "the server requires a client certificate; give ,cert=PEM,key=PEM".to_string()
        }
        (
            We::Client,
            A::BadCertificate
            | A::UnsupportedCertificate
            | A::CertificateUnknown
            | A::UnknownCA
            | A::CertificateExpired
            | A::CertificateRevoked
            | A::AccessDenied,
        ) => format!(
            "the server refused the client certificate (alert {name}); give ,cert=PEM,key=PEM \
             with a certificate from a CA the server trusts"
        ),
        (We::Client, A::HandshakeFailure) => format!(
            "the server refused the handshake (alert {name}): no TLS version, cipher suite or \
             key exchange in common, or it wants a client certificate (,cert=PEM,key=PEM)"
        ),
        (We::Client, A::UnrecognisedName) => format!(
            "the server serves no certificate for the name sent (alert {name}); give \
             ,sni=NAME with a name it serves"
        ),
        (_, A::ProtocolVersion) => {
            format!("no TLS version in common (alert {name}); zerocat speaks TLS 1.2 and 1.3")
        }
        (_, A::NoApplicationProtocol) => {
            format!("no ALPN protocol in common (alert {name}); check alpn= on both ends")
        }
        (
            We::Server,
            A::BadCertificate
            | A::UnsupportedCertificate
            | A::CertificateUnknown
            | A::UnknownCA
            | A::CertificateExpired
            | A::CertificateRevoked,
        ) => format!(
            "the client refused this listener's certificate (alert {name}); give the client \
             the CA that signed cert= (zerocat: ,cafile=; curl: --cacert), or use a \
             certificate from a CA it trusts"
        ),
        (We::Client, _) => format!("the server ended the connection with the alert {name}"),
        (We::Server, _) => format!("the client ended the connection with the alert {name}"),
    }
}

/// An alert as RFC 8446 spells it: `handshake_failure`, `unknown_ca`.
fn alert_name(alert: AlertDescription) -> String {
    match alert {
        AlertDescription::Unknown(code) => format!("number {code}"),
        other => snake(&format!("{other:?}")),
    }
}

fn name_text(name: &ServerName<'_>) -> String {
    match name {
        ServerName::DnsName(dns) => dns.as_ref().to_string(),
        ServerName::IpAddress(ip) => std::net::IpAddr::from(*ip).to_string(),
        _ => "(a name of another kind)".to_string(),
    }
}

/// The leading identifier of a Debug text in words: `CaUsedAsEndEntity { .. }` → "ca used
/// as end entity" (the fallback for a reason this file has no sentence for).
fn words(debug: &str) -> String {
    snake(debug).replace('_', " ")
}

/// `UnknownCA` → `unknown_ca`: the identifier a Debug text starts with, in snake case (an
/// acronym stays one word).
fn snake(debug: &str) -> String {
    let ident: Vec<char> = debug
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect();
    let mut out = String::new();
    for (i, &c) in ident.iter().enumerate() {
        let starts_word = i > 0
            && c.is_ascii_uppercase()
            && (ident[i - 1].is_ascii_lowercase()
                || ident[i - 1].is_ascii_digit()
                || ident.get(i + 1).is_some_and(|n| n.is_ascii_lowercase()));
        if starts_word {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// A certificate's subject ("CN=localhost") and the end of its validity, as UTC text.
pub fn subject_and_expiry(der: &CertificateDer<'_>) -> Option<(String, String)> {
    use x509_parser::prelude::{FromDer, X509Certificate};
    let (_, cert) = X509Certificate::from_der(der.as_ref()).ok()?;
    let not_after = cert.validity().not_after.timestamp().max(0) as u64;
    Some((
        cert.subject().to_string(),
        utc(&UnixTime::since_unix_epoch(std::time::Duration::from_secs(
            not_after,
        ))),
    ))
}

/// A time as UTC: "2026-11-26 20:08:04 UTC".
fn utc(time: &UnixTime) -> String {
    let secs = time.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = crate::units::civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alert_names_are_the_rfcs() {
        assert_eq!(
            alert_name(AlertDescription::HandshakeFailure),
            "handshake_failure"
        );
        assert_eq!(alert_name(AlertDescription::UnknownCA), "unknown_ca");
        assert_eq!(alert_name(AlertDescription::BadRecordMac), "bad_record_mac");
        assert_eq!(alert_name(AlertDescription::Unknown(250)), "number 250");
        assert_eq!(words("CaUsedAsEndEntity"), "ca used as end entity");
        assert_eq!(
            words("UnsupportedSignatureAlgorithmContext { x: 1 }"),
            "unsupported signature algorithm context"
        );
    }

    #[test]
    fn times_are_utc_dates() {
        let at = |s| UnixTime::since_unix_epoch(std::time::Duration::from_secs(s));
        assert_eq!(utc(&at(0)), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(&at(951_782_400)), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(&at(1_795_723_684)), "2026-11-26 20:08:04 UTC");
    }

    #[test]
    fn every_sentence_is_free_of_debug_text() {
        let errors = [
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
            rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(
                webpki::Error::CaUsedAsEndEntity,
            )))),
            rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(
                webpki::Error::MaximumPathDepthExceeded,
            )))),
            rustls::Error::AlertReceived(AlertDescription::CertificateRequired),
            rustls::Error::AlertReceived(AlertDescription::DecodeError),
            rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType),
            rustls::Error::NoCertificatesPresented,
            rustls::Error::DecryptError,
        ];
        for we in [We::Client, We::Server] {
            for e in &errors {
                let text = explain(e, we);
                for debug in ["Other(", "OtherError", "{", "(Ca", "Alert"] {
                    assert!(!text.contains(debug), "{text}");
                }
            }
        }
    }
}
