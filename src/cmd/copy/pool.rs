//! `copy -j N`: regular files copied by N worker threads while the walk goes on.
//!
//! The walk (the calling thread) does what it does without `-j`: it lists each directory
//! from its own fd, creates it before its entries, makes symlinks and special files, and
//! hands every regular file to the workers as a job, with the fd of the directory it was
//! listed in, so the worker opens it there (openat, O_NOFOLLOW) as the walk would. Each
//! worker is a [`Copier`] of its own (its own middle pipe and refusals) that shares the
//! run's meter; the entry it makes comes back to the walk.
//!
//! The walk reports entries in its own order, the order they have without `-j`: a queue of
//! slots resolved from its head, each an entry the walk made, a file in a worker's hands, or
//! a directory whose metadata waits for every slot before it (its whole subtree) to be
//! resolved. So the report, the `-v` lines and the error lines come in the walk's order,
//! and a directory's mode and times are set after its last entry was written.
//!
//! SIGINT/SIGTERM: the walk stops handing out jobs; a worker drops the jobs it takes after
//! the signal and its file in flight stops as any transfer does (the engine's rule); the
//! walk waits for the workers, reports, and the run exits 130.

use std::collections::{HashMap, VecDeque};
use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::Scope;

use super::report::{Entry, Status};
use super::walk::Kind;
use super::{Copier, CopyConfig};
use crate::engine::meter::Meter;
use crate::options::Options;

/// The most jobs `-j` starts by default, however many CPUs: a tree's copy is bound by the
/// filesystems long before that.
pub(super) const MAX_DEFAULT_JOBS: usize = 8;

/// Jobs waiting for a worker, per worker: enough that no worker waits on the walk, few
/// enough that the directory fds the jobs hold stay a handful.
const QUEUED_PER_WORKER: usize = 16;

/// `-j`'s default: the CPUs this process may run on (std asks sched_getaffinity, and the
/// cgroup's CPU quota), at most [`MAX_DEFAULT_JOBS`].
pub(super) fn default_jobs() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_DEFAULT_JOBS)
}

/// A directory whose entries were all handed out: its metadata and its entry, once they
/// are in.
pub(super) struct DirDone {
    pub(super) src: PathBuf,
    pub(super) dst: PathBuf,
    pub(super) meta: fs::Metadata,
    /// The mode of a destination directory that existed before the copy.
    pub(super) existing: Option<u32>,
}

/// One regular file for a worker.
struct Job {
    seq: u64,
    src: PathBuf,
    dst: PathBuf,
    /// The directory it was listed in and that directory's fd (None: an operand).
    at: Option<(PathBuf, Arc<OwnedFd>)>,
}

/// A place in the walk's order.
enum Slot {
    /// An entry the walk made itself.
    Made(Entry),
    /// A file in the workers' hands, by its job's number.
    File(u64),
    /// A directory's metadata and entry, due once every slot before it is resolved.
    Dir(DirDone),
}

/// The walk's side of the workers: the job queue, the results, the order.
pub(super) struct Pool {
    /// Dropped to tell the workers no more jobs come.
    jobs: Option<SyncSender<Job>>,
    results: Receiver<(u64, Option<Entry>)>,
    slots: VecDeque<Slot>,
    /// Results that came back before their slot reached the head.
    arrived: HashMap<u64, Option<Entry>>,
    next_seq: u64,
}

impl Pool {
    /// Starts `n` workers in `scope`; None when not even one thread could be started (the
    /// copy then runs on the walk's thread, as with `-j 1`).
    pub(super) fn start<'scope, 'env>(
        scope: &'scope Scope<'scope, 'env>,
        n: usize,
        opts: &'env Options,
        cfg: &'env CopyConfig,
        meter: &Arc<Meter>,
    ) -> Option<Pool> {
        let (jobs, queue) = mpsc::sync_channel::<Job>(n * QUEUED_PER_WORKER);
        let queue = Arc::new(Mutex::new(queue));
        let (done, results) = mpsc::channel();
        let mut started = 0;
        for i in 0..n {
            let (queue, done, meter) = (Arc::clone(&queue), done.clone(), Arc::clone(meter));
            let spawned = std::thread::Builder::new()
                .name(format!("zerocat-copy-{i}"))
                .spawn_scoped(scope, move || work(opts, cfg, meter, &queue, &done));
            started += spawned.is_ok() as usize;
        }
        (started > 0).then(|| Pool {
            jobs: Some(jobs),
            results,
            slots: VecDeque::new(),
            arrived: HashMap::new(),
            next_seq: 0,
        })
    }
}

/// A worker: takes jobs until the queue closes, copies each file with a copier of its own
/// and sends the entry back (None: dropped after SIGINT/SIGTERM, not started).
fn work(
    opts: &Options,
    cfg: &CopyConfig,
    meter: Arc<Meter>,
    queue: &Mutex<Receiver<Job>>,
    done: &Sender<(u64, Option<Entry>)>,
) {
    let mut copier = Copier::new(opts, cfg);
    copier.meter = meter;
    copier.held = Some(Vec::new());
    loop {
        // The lock is held only while waiting for a job, never while copying.
        let job = match queue.lock() {
            Ok(queue) => queue.recv(),
            Err(_) => return,
        };
        let Ok(job) = job else {
            return;
        };
        let entry = if crate::sys::process::interrupted() {
            None
        } else {
            copier.walk = job.at.into_iter().collect();
            copier.copy_file(&job.src, &job.dst);
            copier.held.as_mut().and_then(Vec::pop)
        };
        if done.send((job.seq, entry)).is_err() {
            return;
        }
    }
}

impl Copier<'_> {
    /// A regular file: to the workers under `-j`, else copied here and now.
    pub(super) fn copy_or_hand_out(&mut self, src: &Path, dst: &Path) {
        if self.pool.is_none() {
            return self.copy_file(src, dst);
        }
        self.take_held();
        let at = self.walk.last().and_then(|(dir, fd)| {
            (src.parent() == Some(dir.as_path())).then(|| (dir.clone(), Arc::clone(fd)))
        });
        let pool = self.pool.as_mut().expect("checked above");
        let seq = pool.next_seq;
        pool.next_seq += 1;
        pool.slots.push_back(Slot::File(seq));
        let job = Job {
            seq,
            src: src.to_path_buf(),
            dst: dst.to_path_buf(),
            at,
        };
        let sent = pool
            .jobs
            .as_ref()
            .is_some_and(|jobs| jobs.send(job).is_ok());
        if !sent {
            // Every worker is gone (a panic): the file is reported failed, not lost.
            self.arrive(seq, Some(worker_gone(src, dst)));
        }
        self.report_ready(false);
    }

    /// A directory after its entries: its metadata now without `-j`; with it, once every
    /// entry before it in the walk's order is in.
    pub(super) fn close_dir(&mut self, dir: DirDone) {
        if self.pool.is_none() {
            return self.finish_dir(dir);
        }
        self.take_held();
        if let Some(pool) = self.pool.as_mut() {
            pool.slots.push_back(Slot::Dir(dir));
        }
        self.report_ready(false);
    }

    /// The end of the walk: no more jobs; waits for the workers' last entries and reports
    /// everything still queued, in order.
    pub(super) fn close_pool(&mut self) {
        if let Some(pool) = self.pool.as_mut() {
            pool.jobs = None;
        }
        self.report_ready(true);
        self.pool = None;
        self.held = None;
    }

    /// Entries the walk made since the last slot go into the order as they are.
    fn take_held(&mut self) {
        let held = self.held.as_mut().map(std::mem::take).unwrap_or_default();
        if let Some(pool) = self.pool.as_mut() {
            pool.slots.extend(held.into_iter().map(Slot::Made));
        }
    }

    fn arrive(&mut self, seq: u64, entry: Option<Entry>) {
        if let Some(pool) = self.pool.as_mut() {
            pool.arrived.insert(seq, entry);
        }
    }

    /// Reports the slots at the head of the order that are resolved. `wait`: until every
    /// slot is (the end of the walk), waiting for the workers.
    fn report_ready(&mut self, wait: bool) {
        self.take_held();
        loop {
            let Some(pool) = self.pool.as_mut() else {
                return;
            };
            while let Ok((seq, entry)) = pool.results.try_recv() {
                pool.arrived.insert(seq, entry);
            }
            let head = match pool.slots.front() {
                None => return,
                Some(Slot::File(seq)) if !pool.arrived.contains_key(seq) => {
                    if !wait {
                        return;
                    }
                    let seq = *seq;
                    match pool.results.recv() {
                        Ok((got, entry)) => pool.arrived.insert(got, entry),
                        // Every worker is gone and this one never came back.
                        Err(_) => pool.arrived.insert(seq, None),
                    };
                    continue;
                }
                Some(_) => pool.slots.pop_front().expect("a head"),
            };
            match head {
                Slot::Made(entry) => self.account(entry),
                Slot::File(seq) => {
                    let entry = self
                        .pool
                        .as_mut()
                        .and_then(|pool| pool.arrived.remove(&seq))
                        .flatten();
                    if let Some(entry) = entry {
                        // The worker counted it in its own totals.
                        if entry.status == Status::Copied {
                            self.totals.files += 1;
                        }
                        self.account(entry);
                    }
                }
                Slot::Dir(dir) => {
                    // Interrupted: like the walk without -j, no metadata after the stop.
                    if !(self.interrupted || crate::sys::process::interrupted()) {
                        self.finish_dir(dir);
                        let made = self.held.as_mut().map(std::mem::take).unwrap_or_default();
                        for entry in made {
                            self.account(entry);
                        }
                    }
                }
            }
        }
    }
}

/// The entry of a file no worker was left to copy.
fn worker_gone(src: &Path, dst: &Path) -> Entry {
    let mut e = Entry::new(src, dst, Some(Kind::File));
    e.status = Status::Failed("not copied: the copy's worker threads ended".into());
    e
}
