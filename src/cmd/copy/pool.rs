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
//! The walk and the workers share one queue behind a mutex, and wake each other only when
//! the other sleeps: the walk when the queue fills up (it goes on once half is taken),
//! a worker when the queue is empty. A wake-up per file (a channel's send and receive)
//! cost as much as copying a 4 KiB file: -j 2 ran 10,000 of them slower than -j 1
//! (`bench/RESULTS.md#copy-workers-for-a-tree`).
//!
//! SIGINT/SIGTERM: the walk stops handing out jobs; a worker drops the jobs it takes after
//! the signal and its file in flight stops as any transfer does (the engine's rule); the
//! walk waits for the workers, reports, and the run exits 130.

use std::collections::{hash_map, HashMap, VecDeque};
use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::Scope;

use super::entry::{Entry, Kind, Status};
use super::{Copier, CopyConfig};
use crate::engine::meter::Meter;
use crate::options::Options;

/// The most jobs `-j` starts by default, however many CPUs: a tree's copy is bound by the
/// filesystems long before that.
pub(super) const MAX_DEFAULT_JOBS: usize = 8;

/// Files of one directory handed to a worker together, at most: a worker owns a
/// directory's run of files, so two workers do not create files in one directory at once
/// (they met on its lock: issue 27's profile), and the queue is taken once a batch, not
/// once a file.
const BATCH: usize = 32;

/// Batches queued per worker before the walk waits; it goes on once half of them are
/// taken. Waking a thread costs about what copying a 4 KiB file does (a futex each way):
/// the walk and the workers wake each other once per this many batches, not once per file.
/// At most this many batches' files (and directory fds) wait in the queue a worker.
const QUEUED_PER_WORKER: usize = 4;

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

/// A file's entry, back from a worker (None: dropped after SIGINT/SIGTERM, not started).
type Done = (u64, Option<Entry>);

/// A place in the walk's order.
enum Slot {
    /// An entry the walk made itself.
    Made(Entry),
    /// A file in the workers' hands, by its job's number.
    File(u64),
    /// A directory's metadata and entry, due once every slot before it is resolved.
    Dir(DirDone),
}

/// What the walk and the workers share, behind one lock.
#[derive(Default)]
struct Queue {
    /// Batches: consecutive files of one directory ([`BATCH`] at most).
    jobs: VecDeque<Vec<Job>>,
    /// No more jobs will come.
    closed: bool,
    results: Vec<Done>,
    /// Workers waiting for a job.
    idle: usize,
    /// Workers not ended yet.
    live: usize,
    /// What the walk waits for, if it does.
    walk_waits: Option<WalkWaits>,
    /// Queued jobs at which the walk waits, and at which it goes on again.
    high: usize,
    low: usize,
}

/// Why the walk sleeps: a worker wakes it only for that.
#[derive(Clone, Copy, PartialEq, Eq)]
enum WalkWaits {
    /// The queue to go down to `low`.
    Room,
    /// A result.
    Result,
}

struct Shared {
    queue: Mutex<Queue>,
    /// Workers wait here for a job.
    work: Condvar,
    /// The walk waits here.
    walk: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // A worker that panicked holding the lock left the queue whole (pushes and pops).
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The walk's side of the workers: the shared queue, and the order the entries are
/// reported in.
pub(super) struct Pool {
    shared: Arc<Shared>,
    slots: VecDeque<Slot>,
    /// Results that came back before their slot reached the head.
    arrived: HashMap<u64, Option<Entry>>,
    next_seq: u64,
    /// Files of the directory being listed, not handed out yet.
    batch: Vec<Job>,
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
        on_disk: &Option<Arc<Meter>>,
    ) -> Option<Pool> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                high: n * QUEUED_PER_WORKER,
                low: n * QUEUED_PER_WORKER / 2,
                ..Queue::default()
            }),
            work: Condvar::new(),
            walk: Condvar::new(),
        });
        for i in 0..n {
            let (worker, meter, on_disk) =
                (Arc::clone(&shared), Arc::clone(meter), on_disk.clone());
            shared.lock().live += 1;
            let spawned = std::thread::Builder::new()
                .name(format!("zerocat-copy-{i}"))
                .spawn_scoped(scope, move || work(opts, cfg, meter, on_disk, &worker));
            if spawned.is_err() {
                shared.lock().live -= 1;
            }
        }
        let started = shared.lock().live;
        (started > 0).then(|| Pool {
            shared,
            slots: VecDeque::new(),
            arrived: HashMap::new(),
            next_seq: 0,
            batch: Vec::with_capacity(BATCH),
        })
    }

    /// Adds a file to the batch; a batch goes out when full, when a file of another
    /// directory (or an operand) comes, and at [`Pool::flush`]. True when one went out.
    fn add(&mut self, job: Job) -> bool {
        let same_dir = |a: &Job, b: &Job| match (&a.at, &b.at) {
            (Some((_, x)), Some((_, y))) => Arc::ptr_eq(x, y),
            _ => false,
        };
        let mut flushed = false;
        if self.batch.last().is_some_and(|last| !same_dir(last, &job)) {
            self.flush();
            flushed = true;
        }
        self.batch.push(job);
        if self.batch.len() >= BATCH {
            self.flush();
            flushed = true;
        }
        flushed
    }

    /// Hands the batch out. If every worker is gone, its files are reported failed.
    fn flush(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH));
        if let Err(batch) = self.hand_out(batch) {
            // Every worker is gone (a panic): the files are reported failed, not lost.
            for job in batch {
                self.arrived
                    .insert(job.seq, Some(worker_gone(&job.src, &job.dst)));
            }
        }
    }

    /// Queues a batch; waits while the queue is full, until half of it was taken. Err:
    /// every worker is gone.
    fn hand_out(&mut self, batch: Vec<Job>) -> Result<(), Vec<Job>> {
        let mut q = self.shared.lock();
        if q.live == 0 {
            return Err(batch);
        }
        q.jobs.push_back(batch);
        if q.idle > 0 {
            self.shared.work.notify_one();
        }
        if q.jobs.len() >= q.high {
            q.walk_waits = Some(WalkWaits::Room);
            while q.jobs.len() > q.low && q.live > 0 {
                q = self.shared.walk.wait(q).unwrap_or_else(|e| e.into_inner());
            }
            q.walk_waits = None;
        }
        Ok(())
    }

    /// Takes the results the workers sent so far; `wait`: at least one, unless every
    /// worker is gone. Returns whether every worker was gone when the results were taken
    /// (under the same lock: a worker puts its last result back before it ends, so then
    /// nothing more will come).
    fn take_results(&mut self, wait: bool) -> bool {
        let mut q = self.shared.lock();
        if wait {
            q.walk_waits = Some(WalkWaits::Result);
            while q.results.is_empty() && q.live > 0 {
                q = self.shared.walk.wait(q).unwrap_or_else(|e| e.into_inner());
            }
            q.walk_waits = None;
        }
        if q.live == 0 {
            // Every worker is gone (a panic): what none of them took is reported failed.
            let left: Vec<Done> = q
                .jobs
                .drain(..)
                .flatten()
                .map(|job| (job.seq, Some(worker_gone(&job.src, &job.dst))))
                .collect();
            q.results.extend(left);
        }
        let results = std::mem::take(&mut q.results);
        let gone = q.live == 0;
        drop(q);
        self.arrived.extend(results);
        gone
    }

    /// No more jobs: idle workers end, the others after the queue is empty.
    fn close(&mut self) {
        self.shared.lock().closed = true;
        self.shared.work.notify_all();
    }
}

/// A worker's hold on the queue: ends the worker's part on the way out, also when it
/// panics (its batch's files not done yet are then reported failed, not waited for).
struct Worker<'a> {
    shared: &'a Shared,
    /// The batch in hand: the files not done yet, the one being copied first.
    in_flight: VecDeque<Job>,
    /// Results of the batch so far, put back with the next turn of the lock.
    done: Vec<Done>,
}

impl Drop for Worker<'_> {
    fn drop(&mut self) {
        let mut q = self.shared.lock();
        q.results.append(&mut self.done);
        for job in self.in_flight.drain(..) {
            q.results
                .push((job.seq, Some(worker_gone(&job.src, &job.dst))));
        }
        q.live -= 1;
        if q.walk_waits.is_some() {
            self.shared.walk.notify_one();
        }
    }
}

/// A worker: takes jobs until the queue is closed and empty, copies each file with a copier
/// of its own, and puts the entry back in the same turn of the lock as it takes the next
/// job.
/// `meter` and `on_disk` are the walk's: the bar counts every worker's bytes.
fn work(
    opts: &Options,
    cfg: &CopyConfig,
    meter: Arc<Meter>,
    on_disk: Option<Arc<Meter>>,
    shared: &Shared,
) {
    let mut copier = Copier::new(opts, cfg);
    copier.meter = meter;
    copier.on_disk = on_disk;
    copier.held = Some(Vec::new());
    let mut worker = Worker {
        shared,
        in_flight: VecDeque::new(),
        done: Vec::new(),
    };
    loop {
        let batch = {
            let mut q = shared.lock();
            if !worker.done.is_empty() {
                q.results.append(&mut worker.done);
                if q.walk_waits == Some(WalkWaits::Result) {
                    shared.walk.notify_one();
                }
            }
            loop {
                if let Some(batch) = q.jobs.pop_front() {
                    if q.walk_waits == Some(WalkWaits::Room) && q.jobs.len() <= q.low {
                        shared.walk.notify_one();
                    }
                    break Some(batch);
                }
                if q.closed {
                    break None;
                }
                q.idle += 1;
                q = shared.work.wait(q).unwrap_or_else(|e| e.into_inner());
                q.idle -= 1;
            }
        };
        let Some(batch) = batch else {
            return;
        };
        worker.in_flight.extend(batch);
        while let Some(job) = worker.in_flight.front() {
            let entry = if crate::sys::process::interrupted() {
                None
            } else {
                // The directory's fd, set once for the run of its files.
                let same = match (copier.walk.last(), &job.at) {
                    (Some((_, held)), Some((_, fd))) => Arc::ptr_eq(held, fd),
                    _ => false,
                };
                if !same {
                    copier.walk.clear();
                    copier.walk.extend(job.at.iter().cloned());
                }
                copier.copy_file(&job.src, &job.dst);
                copier.held.as_mut().and_then(Vec::pop)
            };
            let seq = job.seq;
            worker.in_flight.pop_front();
            worker.done.push((seq, entry));
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
            // Bytes, not components: src was made by joining a name to this very path.
            let (parent, _) = super::walk::split_name(src)?;
            (parent.as_os_str() == dir.as_os_str()).then(|| (dir.clone(), Arc::clone(fd)))
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
        // What came back is looked at once a batch, not once a file (each look takes the
        // queue's lock, which the workers want too).
        if pool.add(job) {
            self.report_ready(false);
        }
    }

    /// A directory after its entries: its metadata now without `-j`; with it, once every
    /// entry before it in the walk's order is in.
    pub(super) fn close_dir(&mut self, dir: DirDone) {
        if self.pool.is_none() {
            return self.finish_dir(dir);
        }
        self.take_held();
        if let Some(pool) = self.pool.as_mut() {
            // The directory's last files go out now, not with the next directory's.
            pool.flush();
            pool.slots.push_back(Slot::Dir(dir));
        }
        self.report_ready(false);
    }

    /// The end of the walk: no more jobs; waits for the workers' last entries and reports
    /// everything still queued, in order.
    pub(super) fn close_pool(&mut self) {
        if let Some(pool) = self.pool.as_mut() {
            pool.flush();
            pool.close();
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

    /// Reports the slots at the head of the order that are resolved. `wait`: until every
    /// slot is (the end of the walk), waiting for the workers.
    fn report_ready(&mut self, wait: bool) {
        self.take_held();
        loop {
            let Some(pool) = self.pool.as_mut() else {
                return;
            };
            let head = match pool.slots.front() {
                None => return,
                Some(Slot::File(seq)) if !pool.arrived.contains_key(seq) => {
                    let seq = *seq;
                    let gone = pool.take_results(wait);
                    if let hash_map::Entry::Vacant(missing) = pool.arrived.entry(seq) {
                        if !wait {
                            return;
                        }
                        if gone {
                            // Every worker ended: each job handed out has its result by
                            // now (copied, or failed by a worker's panic), so this does not
                            // happen; were it to, the walk must not wait forever.
                            missing.insert(None);
                        }
                    }
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
