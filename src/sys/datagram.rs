//! Datagrams in batches: `recvmmsg(2)` and `sendmmsg(2)` over one buffer of slots, each
//! slot one datagram (payload, length, and the peer's address on a listening socket). One
//! call moves up to [`Batch::capacity`] datagrams, where read/write would take one each.

use std::os::fd::{AsRawFd, BorrowedFd};

use nix::errno::Errno;
use nix::libc;

/// A slot holds any datagram (65,507 bytes over IPv4, 65,527 over IPv6) and any run of
/// datagrams the kernel coalesced for one receive (GRO: at most 64 KiB).
pub const SLOT: usize = 65_536;
/// UDP_SEGMENT and UDP_GRO (linux/udp.h), at level SOL_UDP.
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;
/// Segments one GSO send may carry (UDP_MAX_SEGMENTS is 64 in older kernels, 128 since 6.9).
pub const GSO_SEGMENTS: usize = 64;
/// Payload one GSO send may carry (an IP packet's 64 KiB, less headers, with room).
pub const GSO_BYTES: usize = 65_000;
/// Control-message room for one int or u16 (CMSG_SPACE(sizeof(int)) on 64-bit Linux).
const CMSG_ROOM: usize = 24;

/// Slots for a batch of datagrams, reused call after call. Memory is touched only as far
/// as datagrams fill it (small datagrams use the first page of each slot).
pub struct Batch {
    bufs: Vec<u8>,
    /// Payload length of each slot filled.
    lens: Vec<usize>,
    /// The sender (after a receive) or the destination (for a send) of each slot.
    addrs: Vec<libc::sockaddr_storage>,
    addr_lens: Vec<libc::socklen_t>,
    /// GRO: the size of the datagrams the kernel coalesced into slot i (0: one datagram).
    segs: Vec<u16>,
    /// Control messages of each slot's receive.
    control: Vec<u8>,
    /// Slots filled by the last receive (or, in the tests, by `push`).
    filled: usize,
}

impl Batch {
    pub fn new(slots: usize) -> Batch {
        Batch {
            bufs: vec![0; slots * SLOT],
            lens: vec![0; slots],
            // SAFETY: sockaddr_storage is plain data; all zeroes is a valid (empty) value.
            addrs: vec![unsafe { std::mem::zeroed() }; slots],
            addr_lens: vec![0; slots],
            segs: vec![0; slots],
            control: vec![0; slots * CMSG_ROOM],
            filled: 0,
        }
    }

    /// The datagram size of slot `i` when the kernel coalesced several into it (GRO): it
    /// holds `len / seg` datagrams of `seg` bytes and maybe a shorter last one. 0: one.
    pub fn segment(&self, i: usize) -> usize {
        usize::from(self.segs[i])
    }

    /// Datagrams in slot `i` (more than one when GRO coalesced them).
    pub fn datagrams_in(&self, i: usize) -> u64 {
        match self.segment(i) {
            0 => 1,
            seg => self.lens[i].div_ceil(seg).max(1) as u64,
        }
    }

    pub fn capacity(&self) -> usize {
        self.lens.len()
    }

    /// The payload of slot `i`.
    pub fn payload(&self, i: usize) -> &[u8] {
        &self.bufs[i * SLOT..i * SLOT + self.lens[i]]
    }

    /// The address of slot `i`, as the kernel gave it (sockaddr bytes).
    pub fn addr(&self, i: usize) -> (&libc::sockaddr_storage, libc::socklen_t) {
        (&self.addrs[i], self.addr_lens[i])
    }

    /// Receives up to `capacity` datagrams without waiting (MSG_DONTWAIT); with `from`,
    /// each slot keeps its sender's address. Returns how many came (EAGAIN: none queued).
    pub fn receive(&mut self, fd: BorrowedFd<'_>, from: bool) -> Result<usize, Errno> {
        let n = self.capacity();
        let base = self.bufs.as_mut_ptr();
        let mut iovs: Vec<libc::iovec> = (0..n)
            .map(|i| libc::iovec {
                // SAFETY: slot i lies within `bufs` (n * SLOT bytes).
                iov_base: unsafe { base.add(i * SLOT) }.cast(),
                iov_len: SLOT,
            })
            .collect();
        let control = self.control.as_mut_ptr();
        let mut hdrs: Vec<libc::mmsghdr> = (0..n)
            .map(|i| {
                // SAFETY: msghdr is plain data; zeroes, then the fields set below.
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_iov = &mut iovs[i];
                h.msg_hdr.msg_iovlen = 1;
                // SAFETY: slot i's control room lies within `control`.
                h.msg_hdr.msg_control = unsafe { control.add(i * CMSG_ROOM) }.cast();
                h.msg_hdr.msg_controllen = CMSG_ROOM as _;
                if from {
                    h.msg_hdr.msg_name = (&mut self.addrs[i] as *mut libc::sockaddr_storage).cast();
                    h.msg_hdr.msg_namelen =
                        std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
                }
                h
            })
            .collect();
        // SAFETY: every header points into live buffers of the lengths given.
        let got = unsafe {
            libc::recvmmsg(
                fd.as_raw_fd(),
                hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if got < 0 {
            self.filled = 0;
            return Err(Errno::last());
        }
        let got = got as usize;
        for (i, h) in hdrs.iter().enumerate().take(got) {
            self.lens[i] = h.msg_len as usize;
            self.addr_lens[i] = if from { h.msg_hdr.msg_namelen } else { 0 };
            self.segs[i] = gro_segment(&h.msg_hdr);
        }
        self.filled = got;
        Ok(got)
    }

    /// Sends the slots of `range` (within those filled) in one call without waiting; `to`:
    /// each to its slot's address (a listening socket answering its clients), else on the
    /// connected socket. Returns how many the kernel took (in order: the rest were not).
    pub fn send(
        &self,
        fd: BorrowedFd<'_>,
        range: std::ops::Range<usize>,
        to: bool,
    ) -> Result<usize, Errno> {
        let from = range.start;
        let end = range.end.min(self.filled);
        let count = end.saturating_sub(from);
        if count == 0 {
            return Ok(0);
        }
        let mut iovs: Vec<libc::iovec> = (from..end)
            .map(|i| libc::iovec {
                iov_base: self.bufs[i * SLOT..].as_ptr() as *mut libc::c_void,
                iov_len: self.lens[i],
            })
            .collect();
        let mut hdrs: Vec<libc::mmsghdr> = (0..count)
            .map(|k| {
                // SAFETY: as in receive().
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_iov = &mut iovs[k];
                h.msg_hdr.msg_iovlen = 1;
                if to {
                    h.msg_hdr.msg_name =
                        (&self.addrs[from + k] as *const libc::sockaddr_storage) as *mut _;
                    h.msg_hdr.msg_namelen = self.addr_lens[from + k];
                }
                h
            })
            .collect();
        // SAFETY: every header points into live buffers of the lengths given; the kernel
        // only reads them (sendmmsg writes msg_len, in our headers).
        let sent = unsafe {
            libc::sendmmsg(
                fd.as_raw_fd(),
                hdrs.as_mut_ptr(),
                count as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if sent < 0 {
            return Err(Errno::last());
        }
        Ok(sent as usize)
    }

    /// Sends the slots of `range` (within those filled) as one GSO send (UDP_SEGMENT): the
    /// kernel cuts their bytes into datagrams of `seg` bytes (the last may be shorter), so
    /// every slot but the last must be `seg` long, or a GRO slot of `seg`. `to`: to the
    /// first slot's address. Ok(true): all sent; Ok(false): the kernel would not take it
    /// without waiting; Err: refused (EINVAL, EIO: no GSO here; the caller sends without).
    pub fn send_segmented(
        &self,
        fd: BorrowedFd<'_>,
        range: std::ops::Range<usize>,
        seg: usize,
        to: bool,
    ) -> Result<bool, Errno> {
        let mut iovs: Vec<libc::iovec> = range
            .clone()
            .map(|i| libc::iovec {
                iov_base: self.bufs[i * SLOT..].as_ptr() as *mut libc::c_void,
                iov_len: self.lens[i],
            })
            .collect();
        let mut control = [0u8; CMSG_ROOM];
        // SAFETY: msghdr is plain data; the pointers set below outlive the call.
        let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
        h.msg_iov = iovs.as_mut_ptr();
        h.msg_iovlen = iovs.len() as _;
        if to {
            h.msg_name = (&self.addrs[range.start] as *const libc::sockaddr_storage) as *mut _;
            h.msg_namelen = self.addr_lens[range.start];
        }
        h.msg_control = control.as_mut_ptr().cast();
        h.msg_controllen = CMSG_ROOM as _;
        // SAFETY: the control buffer has room for one cmsg of a u16 (CMSG_SPACE(2) <= 24).
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&h);
            (*cmsg).cmsg_level = libc::SOL_UDP;
            (*cmsg).cmsg_type = UDP_SEGMENT;
            (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<u16>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u16>(), seg as u16);
            h.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<u16>() as u32) as _;
        }
        // SAFETY: every pointer in `h` is valid for the call.
        let sent = unsafe { libc::sendmsg(fd.as_raw_fd(), &h, libc::MSG_DONTWAIT) };
        if sent >= 0 {
            return Ok(true);
        }
        match Errno::last() {
            Errno::EAGAIN => Ok(false),
            e => Err(e),
        }
    }

    /// Every slot filled goes to `addr` (a batch from a session's upstream, answering its
    /// client).
    pub fn address_all(&mut self, addr: &libc::sockaddr_storage, addr_len: libc::socklen_t) {
        for i in 0..self.filled {
            self.addrs[i] = *addr;
            self.addr_lens[i] = addr_len;
        }
    }

    /// Appends a datagram (for a send) to `addr` (`addr_len` 0: none, a connected socket).
    /// False when the batch is full. The relay only forwards what it received; the tests
    /// build batches with this.
    #[cfg(test)]
    pub fn push(
        &mut self,
        payload: &[u8],
        addr: &libc::sockaddr_storage,
        addr_len: libc::socklen_t,
    ) -> bool {
        let i = self.filled;
        if i == self.capacity() || payload.len() > SLOT {
            return false;
        }
        self.bufs[i * SLOT..i * SLOT + payload.len()].copy_from_slice(payload);
        self.lens[i] = payload.len();
        self.addrs[i] = *addr;
        self.addr_lens[i] = addr_len;
        self.segs[i] = 0;
        self.filled += 1;
        true
    }
}

/// The UDP_GRO control message of a receive: the size of the datagrams coalesced into it.
fn gro_segment(h: &libc::msghdr) -> u16 {
    // SAFETY: the kernel filled msg_controllen bytes of the control buffer; CMSG_* walk it.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(h);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_UDP && (*cmsg).cmsg_type == UDP_GRO {
                let seg = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
                return seg.clamp(0, i32::from(u16::MAX)) as u16;
            }
            cmsg = libc::CMSG_NXTHDR(h, cmsg);
        }
    }
    0
}

/// Asks the kernel to coalesce arriving datagrams of one flow into one receive (UDP_GRO):
/// false where it does not offer it. Where GRO does not run (loopback has no NAPI), every
/// receive stays one datagram.
pub fn enable_gro(fd: BorrowedFd<'_>) -> bool {
    super::socket::set_option(fd, libc::SOL_UDP, UDP_GRO, &1 as &libc::c_int).is_ok()
}

/// Sets a segment size (UDP_SEGMENT) on a UDP socket, as a GSO send does per call: Err
/// where the kernel has no UDP GSO (before 4.18).
pub fn offer_gso(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    super::socket::set_option(fd, libc::SOL_UDP, UDP_SEGMENT, &1400 as &libc::c_int)
}

/// Datagrams the kernel dropped on arrival at `fd` because its receive queue was full
/// (SO_MEMINFO's SK_MEMINFO_DROPS): loss before zerocat could read them, which the report
/// counts. None where the kernel does not say.
pub fn receive_drops(fd: BorrowedFd<'_>) -> Option<u64> {
    const SO_MEMINFO: libc::c_int = 55;
    const SK_MEMINFO_DROPS: usize = 8;
    let mut info = [0u32; 16];
    let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
    // SAFETY: SO_MEMINFO writes at most `len` bytes of u32 counters into `info`.
    let ret = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_MEMINFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    (ret == 0 && len as usize > SK_MEMINFO_DROPS * 4).then(|| u64::from(info[SK_MEMINFO_DROPS]))
}

/// Asks for a receive queue of `bytes` (SO_RCVBUF, which the kernel caps at
/// `net.core.rmem_max`; as root SO_RCVBUFFORCE goes past it): a burst waits in it instead
/// of being dropped while the relay is busy elsewhere. Best effort.
pub fn grow_receive_queue(fd: BorrowedFd<'_>, bytes: usize) {
    let value = bytes.min(i32::MAX as usize) as libc::c_int;
    for option in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        if super::socket::set_option(fd, libc::SOL_SOCKET, option, &value).is_ok() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsFd;

    #[test]
    fn a_batch_goes_out_and_comes_back_with_each_datagram_whole_and_its_sender() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        let mut out = Batch::new(4);
        // SAFETY: zeroes are a valid sockaddr_storage (unused: a connected socket).
        let none: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        for payload in [&b"one"[..], b"", &[7u8; 1400], b"four"] {
            assert!(out.push(payload, &none, 0));
        }
        assert!(!out.push(b"five", &none, 0), "four slots only");
        assert_eq!(out.send(a.as_fd(), 0..4, false).unwrap(), 4);
        let mut into = Batch::new(8);
        let mut got = Vec::new();
        while got.len() < 4 {
            match into.receive(b.as_fd(), true) {
                Ok(n) => {
                    for i in 0..n {
                        got.push(into.payload(i).to_vec());
                        let (addr, len) = into.addr(i);
                        assert!(len > 0 && addr.ss_family == libc::AF_INET as u16);
                    }
                }
                Err(Errno::EAGAIN) => std::thread::sleep(std::time::Duration::from_millis(1)),
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(
            got,
            [b"one".to_vec(), vec![], vec![7u8; 1400], b"four".to_vec()]
        );
    }
}
