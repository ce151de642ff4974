//! Who may connect to a listener (`tcp-listen:`, `tls-listen:`, `udp-listen:`): ncat's
//! `--allow`/`--deny`/`--allowfile`, socat's `range=`. `allow=CIDR[;CIDR...]`,
//! `deny=CIDR[;CIDR...]`, `allow-file=PATH` (one CIDR a line, `#` comments). A client that
//! matches a `deny=` is refused; with any `allow=`/`allow-file=`, so is one that matches
//! none of them. The address checked is the one a PROXY header carried when the listener
//! reads one (`proxy`), else the peer's. Parsing is pure; the file is read by [`Access::load`]
//! (the command line does, before any endpoint opens).

use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;

use super::OptionWord;

pub const ALLOW: OptionWord = OptionWord {
    form: "allow=CIDR[;CIDR...]",
    meaning: "accept only clients in these networks (127.0.0.1, 10.0.0.0/8, ::1/128)",
};
pub const DENY: OptionWord = OptionWord {
    form: "deny=CIDR[;CIDR...]",
    meaning: "refuse clients in these networks (before allow=)",
};
pub const ALLOW_FILE: OptionWord = OptionWord {
    form: "allow-file=PATH",
    meaning: "allow= read from a file: one CIDR a line, # comments",
};

/// The option words of a listener's access list.
pub const WORDS: [OptionWord; 3] = [ALLOW, DENY, ALLOW_FILE];

/// A network: an address and how many of its leading bits must match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// `10.0.0.0/8`, `127.0.0.1` (/32), `::1` (/128), `[::1]/128`, `fd00::/8`. Host bits
    /// past the prefix are cleared (`10.1.2.3/8` is 10.0.0.0/8), as ncat takes it.
    pub fn parse(text: &str) -> Result<Cidr, String> {
        let expected = "expected an address or a network: 10.0.0.0/8, 192.168.1.7, ::1, fd00::/8";
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let addr = addr
            .strip_prefix('[')
            .and_then(|a| a.strip_suffix(']'))
            .unwrap_or(addr);
        let net: IpAddr = addr
            .parse()
            .map_err(|_| format!("'{text}' is not a network; {expected}"))?;
        let bits = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => bits,
            Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
                match p.parse::<u8>() {
                    Ok(n) if n <= bits => n,
                    _ => {
                        return Err(format!(
                            "'{text}': the prefix /{p} is longer than an {} address ({bits} \
                             bits)",
                            if net.is_ipv4() { "IPv4" } else { "IPv6" }
                        ))
                    }
                }
            }
            Some(p) => {
                return Err(format!(
                    "'{text}': '/{p}' is not a prefix length; {expected}"
                ))
            }
        };
        let net = mask(net, prefix);
        Ok(Cidr { net, prefix })
    }

    /// `ip` is in this network (an IPv4-mapped IPv6 address as the IPv4 one it maps).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        ip.is_ipv4() == self.net.is_ipv4() && mask(ip, self.prefix) == self.net
    }
}

/// `ip` with every bit past the first `prefix` cleared.
fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let keep = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4((u32::from(v4) & keep).into())
        }
        IpAddr::V6(v6) => {
            let keep = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6((u128::from(v6) & keep).into())
        }
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.net, self.prefix)
    }
}

/// A listener's access list; the default admits everyone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    pub allow: Vec<Cidr>,
    pub deny: Vec<Cidr>,
    /// `allow-file=PATH`, and the networks read from it ([`Access::load`]).
    pub allow_file: Option<PathBuf>,
    pub from_file: Vec<Cidr>,
}

impl Access {
    /// Any rule given: clients are checked.
    pub fn any(&self) -> bool {
        !self.allow.is_empty() || !self.deny.is_empty() || self.allow_file.is_some()
    }

    /// Parses `allow=`, `deny=` or `allow-file=` (`name` lowercase).
    pub fn set(&mut self, name: &str, value: Option<&str>) -> Result<(), String> {
        let value = value.filter(|v| !v.is_empty()).ok_or_else(|| {
            format!("option '{name}' needs a value; expected {name}=CIDR[;CIDR...]")
        })?;
        match name {
            "allow-file" => self.allow_file = Some(PathBuf::from(value)),
            "allow" | "deny" => {
                let list = value
                    .split(';')
                    .filter(|c| !c.trim().is_empty())
                    .map(|c| Cidr::parse(c.trim()).map_err(|e| format!("option '{name}': {e}")))
                    .collect::<Result<Vec<_>, _>>()?;
                if name == "allow" {
                    self.allow = list;
                } else {
                    self.deny = list;
                }
            }
            _ => unreachable!("access::WORDS admitted '{name}'"),
        }
        Ok(())
    }

    /// Reads `allow-file=`: one CIDR a line; blank lines and `#` comments (also after a
    /// CIDR) are skipped. An unreadable file or a line that does not parse is the error,
    /// naming the file and the line.
    pub fn load(&mut self) -> Result<(), String> {
        let Some(path) = &self.allow_file else {
            return Ok(());
        };
        let shown = path.display();
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("option 'allow-file': cannot read '{shown}': {e}"))?;
        let mut from_file = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let cidr = Cidr::parse(line)
                .map_err(|e| format!("option 'allow-file': '{shown}' line {}: {e}", number + 1))?;
            from_file.push(cidr);
        }
        if from_file.is_empty() {
            return Err(format!(
                "option 'allow-file': '{shown}' holds no network: every client would be refused"
            ));
        }
        self.from_file = from_file;
        Ok(())
    }

    /// Whether a client from `ip` may connect; when not, why (for the report).
    pub fn check(&self, ip: Option<IpAddr>) -> Result<(), String> {
        if !self.any() {
            return Ok(());
        }
        let Some(ip) = ip else {
            return Err("its address is unknown, and allow=/deny= need one".into());
        };
        let ip = ip.to_canonical();
        if let Some(net) = self.deny.iter().find(|n| n.contains(ip)) {
            return Err(format!("{ip} is in deny={net}"));
        }
        let allows = self.allow.iter().chain(&self.from_file);
        if (!self.allow.is_empty() || self.allow_file.is_some())
            && !allows.clone().any(|n| n.contains(ip))
        {
            let mut lists = Vec::new();
            if !self.allow.is_empty() {
                let nets: Vec<String> = self.allow.iter().map(ToString::to_string).collect();
                lists.push(format!("allow={}", nets.join(";")));
            }
            if let Some(path) = &self.allow_file {
                lists.push(format!("allow-file={}", path.display()));
            }
            return Err(format!("{ip} is in none of {}", lists.join(" or ")));
        }
        Ok(())
    }

    /// Writes `,allow=…,deny=…,allow-file=…` (Display of an endpoint).
    pub fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |nets: &[Cidr]| {
            let nets: Vec<String> = nets.iter().map(ToString::to_string).collect();
            nets.join(";")
        };
        if !self.allow.is_empty() {
            write!(f, ",allow={}", list(&self.allow))?;
        }
        if !self.deny.is_empty() {
            write!(f, ",deny={}", list(&self.deny))?;
        }
        if let Some(path) = &self.allow_file {
            write!(f, ",allow-file={}", path.display())?;
        }
        Ok(())
    }
}

/// Whether `name` is one of this module's words.
pub fn is_word(name: &str) -> bool {
    WORDS.iter().any(|o| o.word() == name)
}

impl super::Endpoint {
    /// The access list of a `tcp-listen:`, `tls-listen:` or `udp-listen:`.
    pub fn access(&self) -> Option<&Access> {
        match self {
            super::Endpoint::TcpListen { listen, .. } => Some(&listen.access),
            super::Endpoint::UdpListen { access, .. } => Some(access),
            _ => None,
        }
    }

    /// Reads the file of `allow-file=`, if any ([`Access::load`]).
    pub fn load_access_file(&mut self) -> Result<(), String> {
        match self {
            super::Endpoint::TcpListen { listen, .. } => listen.access.load(),
            super::Endpoint::UdpListen { access, .. } => access.load(),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
