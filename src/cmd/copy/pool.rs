//! `copy -j N`: a tree copied by N threads, each owning whole directories.
//!
//! A directory is a job. The thread that lists a directory copies its files, makes its
//! symlinks and special files, and creates its subdirectories; each subdirectory, opened
//! at its parent (O_NOFOLLOW), becomes a job on a shared stack that any thread may take
//! (cpz's way: no per-file hand-off, and no two threads creating files in one directory,
//! where they met on its lock — issue 27's profile). When the stack holds
//! [`MAX_QUEUED`] jobs, a subdirectory is listed at once by the thread that met it, as
//! without `-j`, so the open directories stay few however wide the tree.
//!
//! The calling thread is one of the N: it hands out the operands, takes jobs like the
//! others, and is the only one that reports. Entries come out in the order they have
//! without `-j`: each directory has a [`Node`] where its lister puts, in listing order,
//! the entries that print something or that JSON keeps, and a place-holder for each
//! subdirectory; the reporter walks that tree of nodes from the top, waiting at a node
//! its lister has not finished. It passes the end of a directory only once everything
//! under it was reported — so done — and sets the directory's metadata then. An entry
//! nobody asked to see (a file copied, in a quiet run) is only counted, by the thread
//! that made it, and nothing of it is kept.
//!
//! SIGINT/SIGTERM: every thread stops taking entries and jobs; the reporter waits for the
//! threads, reports what was done, and the run exits 130.

use std::collections::VecDeque;
use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::entry::{Entry, Kind, Status};
use super::file::DstDir;
use super::Copier;

/// The most jobs `-j` starts by default, however many CPUs: a tree's copy is bound by the
/// filesystems long before that.
pub(super) const MAX_DEFAULT_JOBS: usize = 8;

/// Directories waiting on the stack at most (each holds two fds); past it, the thread
/// that meets a subdirectory lists it itself.
const MAX_QUEUED: usize = 64;

/// Entries a reporting thread copies between two looks at what it can report.
pub(super) const REPORT_EVERY: usize = 64;

/// `-j`'s default: twice the CPUs this process may run on (std asks sched_getaffinity, and
/// the cgroup's CPU quota), at most [`MAX_DEFAULT_JOBS`]. A thread waits in the kernel
/// (a directory's lock, ext4's inode allocation, reclaim) while another runs: on 2 CPUs,
/// issue 27's tree of 100,000 small files took 1.10 s with 4 threads against 1.24 with 2
/// on tmpfs (7 interleaved rounds), 2.1-3.0 s against 2.6-3.3 on ext4 in two rounds of
/// three, and 1,000,000 empty files 6.0 s against 6.7 (bench/NOTEBOOK.md).
pub(super) fn default_jobs() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get() * 2)
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

/// A directory to list: created in the destination already, both opened at their parents.
pub(super) struct DirJob {
    pub(super) src: PathBuf,
    /// The directory, listed from this fd; its entries are opened at it.
    pub(super) fd: OwnedFd,
    /// Its copy, where its files are created.
    pub(super) dst_dir: DstDir,
    /// Where its entries go.
    pub(super) node: Arc<Node>,
}

/// What a directory's lister leaves for the reporter, in listing order.
#[derive(Default)]
pub(super) struct Node {
    state: Mutex<NodeState>,
}

#[derive(Default)]
struct NodeState {
    items: VecDeque<Item>,
    /// Its lister is done: nothing more comes.
    listed: bool,
}

enum Item {
    Entry(Entry),
    /// A subdirectory: its node, and its metadata and entry, due after everything in it.
    Dir(Arc<Node>, DirDone),
}

impl Node {
    fn lock(&self) -> MutexGuard<'_, NodeState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, item: Item) {
        self.lock().items.push_back(item);
    }

    fn mark_listed(&self) {
        self.lock().listed = true;
    }
}

/// The jobs every thread takes from.
#[derive(Default)]
struct Jobs {
    stack: Vec<DirJob>,
    /// Jobs taken and not finished.
    busy: usize,
    /// Workers (not the reporter) waiting for a job.
    idle: usize,
    /// The reporter sleeps until a job is pushed or finished.
    reporter_waits: bool,
    /// Every operand was handed out: once the stack is empty and no job is in hand, no
    /// job will come.
    sealed: bool,
}

impl Jobs {
    fn over(&self) -> bool {
        self.sealed && self.busy == 0 && self.stack.is_empty()
    }

    /// The next job, now in hand; none once a stop was asked (what waits is dropped).
    fn pop(&mut self) -> Option<DirJob> {
        if crate::sys::process::interrupted() {
            self.stack.clear();
        }
        let job = self.stack.pop()?;
        self.busy += 1;
        Some(job)
    }
}

/// What the threads of one `-j` run share.
pub(super) struct Tree {
    jobs: Mutex<Jobs>,
    /// Workers wait here for a job.
    work: Condvar,
    /// The reporter waits here.
    reporter: Condvar,
}

impl Tree {
    fn lock(&self) -> MutexGuard<'_, Jobs> {
        // A thread that panicked holding the lock left the stack whole (pushes and pops).
        self.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Puts a job on the stack; gives it back when the stack is full (or the run is
    /// stopping): the caller lists it itself.
    pub(super) fn offer(&self, job: DirJob) -> Result<(), DirJob> {
        let mut jobs = self.lock();
        if jobs.stack.len() >= MAX_QUEUED || crate::sys::process::interrupted() {
            return Err(job);
        }
        jobs.stack.push(job);
        if jobs.idle > 0 {
            self.work.notify_one();
        } else if jobs.reporter_waits {
            self.reporter.notify_one();
        }
        Ok(())
    }

    /// A worker's next job; None when the run is over (or stopping).
    fn take(&self) -> Option<DirJob> {
        let mut jobs = self.lock();
        loop {
            if let Some(job) = jobs.pop() {
                return Some(job);
            }
            if jobs.over() || crate::sys::process::interrupted() {
                return None;
            }
            jobs.idle += 1;
            // Timed: a signal does not wake a condition variable.
            jobs = self
                .work
                .wait_timeout(jobs, Duration::from_millis(100))
                .unwrap_or_else(|e| e.into_inner())
                .0;
            jobs.idle -= 1;
        }
    }

    /// The reporter's next job, or None when it should report (something finished, or
    /// nothing is left to take); `over`: the run is over.
    fn take_or_wait(&self) -> (Option<DirJob>, bool) {
        let mut jobs = self.lock();
        if let Some(job) = jobs.pop() {
            return (Some(job), false);
        }
        if jobs.over() {
            return (None, true);
        }
        jobs.reporter_waits = true;
        jobs = self
            .reporter
            .wait_timeout(jobs, Duration::from_millis(100))
            .unwrap_or_else(|e| e.into_inner())
            .0;
        jobs.reporter_waits = false;
        (None, jobs.over())
    }

    /// A job is done (its node is marked listed first).
    fn finish(&self) {
        let mut jobs = self.lock();
        jobs.busy -= 1;
        if jobs.over() {
            self.work.notify_all();
        }
        if jobs.reporter_waits {
            self.reporter.notify_one();
        }
    }

    /// No operand is left to hand out.
    fn seal(&self) {
        let mut jobs = self.lock();
        jobs.sealed = true;
        if jobs.over() {
            self.work.notify_all();
        }
    }
}

/// A job in a thread's hands: finished however the listing ends, a panic included (the
/// directory then says so, and the run does not wait for it).
struct InHand<'a> {
    tree: &'a Tree,
    node: Arc<Node>,
    src: PathBuf,
    dst: PathBuf,
    ended: bool,
}

impl<'a> InHand<'a> {
    fn new(tree: &'a Tree, job: &DirJob) -> InHand<'a> {
        InHand {
            tree,
            node: Arc::clone(&job.node),
            src: job.src.clone(),
            dst: job.dst_dir.path.clone(),
            ended: false,
        }
    }
}

impl Drop for InHand<'_> {
    fn drop(&mut self) {
        if !self.ended {
            let mut e = Entry::new(&self.src, &self.dst, Some(Kind::Dir));
            e.status = Status::Failed("not all copied: a thread of the copy ended".into());
            self.node.push(Item::Entry(e));
        }
        self.node.mark_listed();
        self.tree.finish();
    }
}

/// What a worker thread counted, for the run's totals.
pub(super) type Counted = (super::report::Totals, u64, bool);

impl<'a> Copier<'a> {
    /// Copies `sources` with `n` threads in all, this one included: hands out the
    /// operands, lists directories with the others, and reports in the walk's order.
    pub(super) fn copy_in_parallel(
        &mut self,
        n: usize,
        sources: &[PathBuf],
        dest: &std::path::Path,
        dest_is_dir: bool,
    ) {
        let tree = Arc::new(Tree {
            jobs: Mutex::new(Jobs::default()),
            work: Condvar::new(),
            reporter: Condvar::new(),
        });
        let root = Arc::new(Node::default());
        let counted: Vec<Counted> = std::thread::scope(|scope| {
            let mut workers = Vec::new();
            for i in 1..n {
                let worker = self.worker(&tree);
                let spawned = std::thread::Builder::new()
                    .name(format!("zerocat-copy-{i}"))
                    .spawn_scoped(scope, move || work(worker));
                match spawned {
                    Ok(handle) => workers.push(handle),
                    Err(_) => break,
                }
            }
            self.tree = Some(Arc::clone(&tree));
            self.node = Some(Arc::clone(&root));
            self.cursor = vec![(Arc::clone(&root), None)];
            self.copy_operands(sources, dest, dest_is_dir);
            root.mark_listed();
            tree.seal();
            loop {
                self.report_ready(false);
                match tree.take_or_wait() {
                    (Some(job), _) => self.run_job(&tree, job),
                    (None, true) => break,
                    (None, false) => {}
                }
            }
            // A worker that panicked said so in its directory; its count is lost with it.
            workers
                .into_iter()
                .filter_map(|handle| handle.join().ok())
                .collect()
        });
        // Every thread has ended: what is left is final.
        self.report_ready(true);
        for (totals, entries, interrupted) in counted {
            self.totals.add(&totals);
            self.entry_count += entries;
            self.interrupted |= interrupted;
        }
        self.tree = None;
        self.node = None;
    }

    /// A worker thread's copier: its own pipe, refusals and totals; the run's meter, file
    /// count, hard links and tree.
    fn worker(&self, tree: &Arc<Tree>) -> Copier<'a> {
        let mut copier = Copier::new(self.opts, self.cfg);
        copier.meter = Arc::clone(&self.meter);
        copier.on_disk = self.on_disk.clone();
        copier.files_done = Arc::clone(&self.files_done);
        copier.links = Arc::clone(&self.links);
        copier.tree = Some(Arc::clone(tree));
        // Entries go to the node of the directory in hand (list_job sets it).
        copier.node = Some(Arc::new(Node::default()));
        copier
    }

    /// Lists a job's directory, then tells the tree it is done (also if the listing panics).
    fn run_job(&mut self, tree: &Tree, job: DirJob) {
        let mut in_hand = InHand::new(tree, &job);
        self.list_job(job);
        in_hand.ended = true;
    }

    /// An entry is done: accounted now without `-j`; under it, put in its directory's node
    /// when the reporter must show or keep it, else only counted here.
    pub(super) fn done(&mut self, e: Entry) {
        match &self.node {
            Some(node) if self.shows(&e) => node.push(Item::Entry(e)),
            Some(_) => self.tally(&e),
            None => self.account(e),
        }
    }

    /// A subdirectory, created and opened: listed by whichever thread takes it, its
    /// metadata set once everything in it was reported. Without `-j`: listed now, its
    /// metadata set after.
    pub(super) fn copy_subtree(&mut self, job: DirJob, dir: DirDone) {
        let Some(node) = &self.node else {
            self.list_job(job);
            if !self.interrupted {
                self.finish_dir(dir);
            }
            return;
        };
        node.push(Item::Dir(Arc::clone(&job.node), dir));
        let job = match &self.tree {
            Some(tree) => match tree.offer(job) {
                Ok(()) => return,
                Err(job) => job,
            },
            None => job,
        };
        let node = Arc::clone(&job.node);
        self.list_job(job);
        node.mark_listed();
    }

    /// Lists a directory's job into its node, this copier's entries going there meanwhile.
    pub(super) fn list_job(&mut self, job: DirJob) {
        let DirJob {
            src,
            fd,
            dst_dir,
            node,
        } = job;
        let outer = self.node.as_mut().map(|n| std::mem::replace(n, node));
        let dst = dst_dir.path.clone();
        let outer_dst = self.dst_dir.replace(dst_dir);
        let dir = fd.as_raw_fd();
        self.walk.push((src.clone(), fd));
        self.copy_listing(dir, &src, &dst);
        self.walk.pop();
        self.dst_dir = outer_dst;
        if let Some(outer) = outer {
            self.node = Some(outer);
        }
    }

    /// Reports the entries at the head of the walk's order that are in, and sets the
    /// metadata of each directory passed. `last`: every thread has ended, so a node not
    /// finished never will be (a stop): it is passed as it is.
    pub(super) fn report_ready(&mut self, last: bool) {
        while let Some((node, _)) = self.cursor.last() {
            let (item, listed) = {
                let mut state = node.lock();
                (state.items.pop_front(), state.listed)
            };
            match item {
                Some(Item::Entry(e)) => self.account(e),
                Some(Item::Dir(child, dir)) => self.cursor.push((child, Some(dir))),
                None if listed || last => {
                    let (_, dir) = self.cursor.pop().expect("a node");
                    // Stopped: like the walk without -j, no metadata after the stop.
                    let stopped = self.interrupted || crate::sys::process::interrupted();
                    if let (Some(dir), false) = (dir, stopped) {
                        self.finish_dir(dir);
                    }
                }
                None => return,
            }
        }
    }
}

/// A worker thread: takes directories until the run is over, counts what it did.
fn work(mut copier: Copier<'_>) -> Counted {
    let tree = Arc::clone(
        copier
            .tree
            .as_ref()
            .expect("a worker's copier has the tree"),
    );
    while let Some(job) = tree.take() {
        copier.run_job(&tree, job);
    }
    (
        std::mem::take(&mut copier.totals),
        copier.entry_count,
        copier.interrupted,
    )
}
