//! The CUDA helper: what `gpudoctor __cuda-probe --request JSON` does in its own process, under
//! the parent's timeout (`mod.rs`). It prints one [`Event`] per line on stdout, flushed, and
//! announces every step before it starts (`step`), so that when a call never returns the parent
//! knows which GPU and which call it was.
//!
//! Steps, in order:
//! 1. load the library, `cuDriverGetVersion`, `cuInit(0)`, `cuDeviceGetCount`;
//! 2. per device (bus id, name): the primary context, a [`Request::round_trip_bytes`] allocation,
//!    a pattern copied in and out, compared byte for byte;
//! 3. `--bandwidth`, per working device and placement (its own NUMA node, then another): a
//!    thread bound to that node's CPUs (`sched_setaffinity`) with its memory policy bound to the
//!    node (`set_mempolicy(MPOL_BIND)`), pinned host memory allocated there
//!    (`cuMemHostAlloc`: first touch from that thread), one warm-up then
//!    [`Request::iterations`] copies each way, each timed by two CUDA events around it on the
//!    default stream (GPU time, as bandwidthTest and nvbandwidth measure); the median is
//!    reported;
//! 4. `--bandwidth`, per ordered pair of working devices: `cuDeviceCanAccessPeer`, peer access
//!    enabled both ways, one warm-up then `iterations` `cuMemcpyPeer` copies timed the same way,
//!    then one copy of a pattern (`round_trip_bytes`) read back and compared.

use std::ffi::c_void;
use std::time::Instant;

use super::ffi::{CuContext, CuDevice, CuDevicePtr, Driver};
use super::{PlacementPlan, Request, pattern};
use crate::answers::cuda::{CudaError, Direction, Event, HostCopy, Placement, code, step};
use crate::answers::nvml::normalize_bus_id;

/// A device whose round trip worked, kept for the bandwidth phases.
struct Ready {
    ordinal: u32,
    device: CuDevice,
    context: CuContext,
    bus_id: Option<String>,
}

// SAFETY: a CUDA context handle may be made current on any thread (CUDA programming guide,
// "Context"); the handle itself is an opaque pointer owned by the driver.
unsafe impl Send for Ready {}
unsafe impl Sync for Ready {}

/// Run the probe, handing every event to `emit`. Returns the process exit code (0 whatever
/// CUDA said: failures are events).
pub fn run(request: &Request, emit: &(dyn Fn(Event) + Sync)) -> i32 {
    emit(Event::Step {
        step: step::LOAD.into(),
        ordinal: None,
        peer: None,
    });
    let shown = request.shown.as_deref().unwrap_or(&request.library);
    let loaded = match &request.root {
        // Found under --root by the parent: opened again here, confined and checked, and
        // loaded by its descriptor (host_lib.rs), so a link swapped in since cannot redirect it.
        Some(root) => {
            let fs = crate::source::rooted::RootedFs::new(root);
            match crate::source::host_lib::open_under_root(&fs, &request.library) {
                Some(lib) => Driver::load(&lib.path().display().to_string()).map(|d| (d, Some(lib))),
                None => Err("not a loadable library under the root (gone, a link out of the root, not a regular ELF file, or writable by others)".to_string()),
            }
        }
        None => Driver::load(&request.library).map(|d| (d, None)),
    };
    // The descriptor of a library found under the root stays open while it is loaded.
    let (driver, _opened) = match loaded {
        Ok(d) => d,
        Err(message) => {
            emit(Event::LoadError {
                message: format!("{shown}: {message}"),
            });
            emit(Event::Done);
            return 0;
        }
    };
    emit(Event::Library {
        path: shown.to_string(),
        file_version: mapped_version("libcuda.so."),
    });
    if let Ok(version) = driver.driver_version() {
        emit(Event::DriverVersion { version });
    }
    emit(Event::Step {
        step: step::INIT.into(),
        ordinal: None,
        peer: None,
    });
    let started = std::time::Instant::now();
    let init = driver.init().err().unwrap_or(code::SUCCESS);
    emit(Event::Init {
        code: init,
        micros: Some(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX)),
    });
    if init != code::SUCCESS {
        emit(Event::Done);
        return 0;
    }
    let (count_code, count) = match driver.device_count() {
        Ok(n) => (code::SUCCESS, n),
        Err(c) => (c, 0),
    };
    emit(Event::Count {
        code: count_code,
        count,
    });
    let mut ready = Vec::new();
    for ordinal in 0..count.min(64) {
        if let Some(r) = round_trip(&driver, request, ordinal, emit) {
            ready.push(r);
        }
    }
    if request.bandwidth {
        for r in &ready {
            host_copies(&driver, request, r, emit);
        }
        peer_copies(&driver, request, &ready, emit);
    }
    for r in &ready {
        driver.release_primary(r.device);
    }
    emit(Event::Done);
    0
}

fn announce(emit: &(dyn Fn(Event) + Sync), what: &str, ordinal: u32, peer: Option<u32>) {
    emit(Event::Step {
        step: what.into(),
        ordinal: Some(ordinal),
        peer,
    });
}

/// Step 2 for one device; `Some` when it works.
fn round_trip(
    driver: &Driver,
    request: &Request,
    ordinal: u32,
    emit: &(dyn Fn(Event) + Sync),
) -> Option<Ready> {
    announce(emit, step::DEVICE, ordinal, None);
    let device = match driver.device(ordinal) {
        Ok(d) => d,
        Err(c) => {
            emit(Event::Device {
                ordinal,
                bus_id: None,
                name: None,
                error: Some(CudaError::new(step::DEVICE, c)),
            });
            return None;
        }
    };
    let bus_id = driver
        .pci_bus_id(device)
        .ok()
        .and_then(|b| normalize_bus_id(&b));
    emit(Event::Device {
        ordinal,
        bus_id: bus_id.clone(),
        name: driver.name(device).ok(),
        error: None,
    });
    if bus_id.as_ref().is_some_and(|b| request.exclude.contains(b)) {
        return None;
    }
    let started = Instant::now();
    let bytes = request.round_trip_bytes as usize;
    let finish = |error: Option<CudaError>, mismatched: Option<u64>| {
        emit(Event::RoundTrip {
            ordinal,
            bytes: bytes as u64,
            error,
            mismatched_bytes: mismatched,
            micros: started.elapsed().as_micros() as u64,
        });
    };
    announce(emit, step::CONTEXT, ordinal, None);
    let context = match driver
        .retain_primary(device)
        .and_then(|ctx| driver.set_current(ctx).map(|_| ctx))
    {
        Ok(ctx) => ctx,
        Err(c) => {
            finish(Some(CudaError::new(step::CONTEXT, c)), None);
            return None;
        }
    };
    let failed = |what: &str, c: i32| {
        finish(Some(CudaError::new(what, c)), None);
        driver.release_primary(device);
        None
    };
    announce(emit, step::ALLOC, ordinal, None);
    let dptr = match driver.mem_alloc(bytes) {
        Ok(p) => p,
        Err(c) => return failed(step::ALLOC, c),
    };
    // A pattern that changes every byte and differs per device: a copy that lands on the
    // wrong device, or a stuck bit, shows.
    let sent = pattern::pattern(bytes, ordinal as usize * 7);
    let mut back = vec![0u8; bytes];
    announce(emit, step::COPY_IN, ordinal, None);
    if let Err(c) = driver.htod(dptr, sent.as_ptr() as *const c_void, bytes) {
        driver.mem_free(dptr);
        return failed(step::COPY_IN, c);
    }
    announce(emit, step::COPY_OUT, ordinal, None);
    if let Err(c) = driver.dtoh(back.as_mut_ptr() as *mut c_void, dptr, bytes) {
        driver.mem_free(dptr);
        return failed(step::COPY_OUT, c);
    }
    driver.mem_free(dptr);
    let mismatched = pattern::mismatched(&sent, &back);
    finish(None, Some(mismatched));
    if mismatched > 0 {
        driver.release_primary(device);
        return None;
    }
    Some(Ready {
        ordinal,
        device,
        context,
        bus_id,
    })
}

/// The median of the samples (they are few; sorting is fine).
fn median(mut samples: Vec<f64>) -> Option<f64> {
    samples.retain(|s| s.is_finite());
    if samples.is_empty() {
        return None;
    }
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    Some(if n % 2 == 1 {
        samples[n / 2]
    } else {
        (samples[n / 2 - 1] + samples[n / 2]) / 2.0
    })
}

/// GB/s, to 0.001: an event's resolution (about half a microsecond, cuda.h
/// `cuEventElapsedTime`) leaves nothing meaningful below that on a copy of milliseconds.
fn gbps(bytes: usize, seconds: f64) -> f64 {
    if seconds > 0.0 {
        (bytes as f64 / seconds / 1e9 * 1000.0).round() / 1000.0
    } else {
        f64::INFINITY
    }
}

/// Step 3 for one device: each placement on its own thread, one after the other.
fn host_copies(driver: &Driver, request: &Request, r: &Ready, emit: &(dyn Fn(Event) + Sync)) {
    let default = vec![PlacementPlan {
        placement: Placement::Local,
        node: None,
        cpus: Vec::new(),
    }];
    let plans = r
        .bus_id
        .as_ref()
        .and_then(|b| request.placements.get(b))
        .filter(|p| !p.is_empty())
        .unwrap_or(&default);
    for plan in plans {
        std::thread::scope(|scope| {
            let handle =
                scope.spawn(|| copies_from(driver, request, r, plan, emit).unwrap_or_default());
            let copies = handle.join().unwrap_or_default();
            for copy in copies {
                emit(Event::Copy {
                    ordinal: r.ordinal,
                    copy,
                });
            }
        });
    }
}

/// One placement: bind this thread, allocate, time both directions.
fn copies_from(
    driver: &Driver,
    request: &Request,
    r: &Ready,
    plan: &PlacementPlan,
    emit: &(dyn Fn(Event) + Sync),
) -> Option<Vec<HostCopy>> {
    let binding_error = super::numa::bind_thread(plan.node, &plan.cpus).err();
    let bytes = request.copy_bytes as usize;
    let iterations = request.iterations.max(1);
    let blank = |direction, error: Option<CudaError>| HostCopy {
        direction,
        placement: plan.placement,
        numa_node: plan.node,
        binding_error: binding_error.clone(),
        bytes: bytes as u64,
        iterations,
        gbps: None,
        error,
    };
    let both_failed = |what: &str, c: i32| {
        Some(vec![
            blank(Direction::H2d, Some(CudaError::new(what, c))),
            blank(Direction::D2h, Some(CudaError::new(what, c))),
        ])
    };
    if let Err(c) = driver.set_current(r.context) {
        return both_failed(step::CONTEXT, c);
    }
    announce(emit, step::HOST_ALLOC, r.ordinal, None);
    let host = match driver.host_alloc(bytes) {
        Ok(p) => p,
        Err(c) => return both_failed(step::HOST_ALLOC, c),
    };
    announce(emit, step::ALLOC, r.ordinal, None);
    let dptr = match driver.mem_alloc(bytes) {
        Ok(p) => p,
        Err(c) => {
            driver.host_free(host);
            return both_failed(step::ALLOC, c);
        }
    };
    let mut out = Vec::new();
    for direction in [Direction::H2d, Direction::D2h] {
        let what = match direction {
            Direction::H2d => step::H2D,
            Direction::D2h => step::D2H,
        };
        announce(emit, what, r.ordinal, None);
        let copy = || match direction {
            Direction::H2d => driver.htod(dptr, host as *const c_void, bytes),
            Direction::D2h => driver.dtoh(host, dptr, bytes),
        };
        let mut samples = Vec::new();
        let mut error = None;
        // One warm-up copy (page tables, DMA engine start), then the timed ones.
        for i in 0..=iterations {
            match driver.timed(&mut || copy()) {
                Ok(secs) if i > 0 => samples.push(gbps(bytes, secs)),
                Ok(_) => {}
                Err(c) => {
                    error = Some(CudaError::new(what, c));
                    break;
                }
            }
        }
        let mut entry = blank(direction, error.clone());
        if error.is_none() {
            entry.gbps = median(samples);
        }
        out.push(entry);
    }
    driver.mem_free(dptr);
    driver.host_free(host);
    Some(out)
}

/// Step 4.
fn peer_copies(driver: &Driver, request: &Request, ready: &[Ready], emit: &(dyn Fn(Event) + Sync)) {
    if ready.len() < 2 {
        return;
    }
    let bytes = request.copy_bytes as usize;
    let iterations = request.iterations.max(1);
    // One source and one destination buffer per device, reused by every pair.
    let mut buffers: Vec<Option<(CuDevicePtr, CuDevicePtr)>> = Vec::new();
    for r in ready {
        let pair = driver.set_current(r.context).ok().and_then(|_| {
            let src = driver.mem_alloc(bytes).ok()?;
            match driver.mem_alloc(bytes) {
                Ok(dst) => Some((src, dst)),
                Err(_) => {
                    driver.mem_free(src);
                    None
                }
            }
        });
        buffers.push(pair);
    }
    for (i, a) in ready.iter().enumerate() {
        for (j, b) in ready.iter().enumerate() {
            if i == j {
                continue;
            }
            announce(emit, step::PEER, a.ordinal, Some(b.ordinal));
            let verified_event = |access, gbps, error, mismatched_bytes| Event::Peer {
                from: a.ordinal,
                to: b.ordinal,
                access,
                bytes: bytes as u64,
                iterations,
                gbps,
                error,
                mismatched_bytes,
            };
            let event = |access, gbps, error| verified_event(access, gbps, error, None);
            let access = match driver.can_access_peer(a.device, b.device) {
                Ok(x) => x,
                Err(c) => {
                    emit(event(None, None, Some(CudaError::new(step::PEER, c))));
                    continue;
                }
            };
            let (Some((src, _)), Some((_, dst))) = (buffers[i], buffers[j]) else {
                emit(event(
                    Some(access),
                    None,
                    Some(CudaError::new(step::ALLOC, code::OUT_OF_MEMORY)),
                ));
                continue;
            };
            if !access {
                emit(event(Some(false), None, None));
                continue;
            }
            let enabled = driver
                .set_current(a.context)
                .and_then(|_| driver.enable_peer_access(b.context))
                .and_then(|_| driver.set_current(b.context))
                .and_then(|_| driver.enable_peer_access(a.context));
            if let Err(c) = enabled {
                emit(event(Some(true), None, Some(CudaError::new(step::PEER, c))));
                continue;
            }
            // Timed on the source's default stream: cuMemcpyPeer is serialised with the work
            // of the current, source and destination contexts (cuda.h), so the stop event
            // completes after the copy. One warm-up, then the median of the timed copies.
            let measured = driver.set_current(a.context).and_then(|_| {
                let mut samples = Vec::new();
                for i in 0..=iterations {
                    let secs = driver
                        .timed(&mut || driver.memcpy_peer(dst, b.context, src, a.context, bytes))?;
                    if i > 0 {
                        samples.push(gbps(bytes, secs));
                    }
                }
                driver.synchronize()?;
                Ok(median(samples))
            });
            let verified = measured.and_then(|g| {
                let n = request.round_trip_bytes as usize;
                Ok((g, verify_peer(driver, a, b, n, (i, j))?))
            });
            match verified {
                Ok((g, wrong)) => emit(verified_event(Some(true), g, None, Some(wrong))),
                Err(c) => emit(event(Some(true), None, Some(CudaError::new(step::PEER, c)))),
            }
        }
    }
    for (r, pair) in ready.iter().zip(buffers) {
        if let Some((src, dst)) = pair
            && driver.set_current(r.context).is_ok()
        {
            driver.mem_free(src);
            driver.mem_free(dst);
        }
    }
}

/// Copy a pattern from `a` to `b` once and read it back: the bytes that came back different.
/// The pattern depends on the pair, so a buffer left over from another pair cannot pass.
fn verify_peer(
    driver: &Driver,
    a: &Ready,
    b: &Ready,
    bytes: usize,
    pair: (usize, usize),
) -> Result<u64, i32> {
    let pattern = pattern::pattern(bytes, pair.0.wrapping_mul(7) ^ pair.1.wrapping_mul(13));
    driver.set_current(a.context)?;
    let src = driver.mem_alloc(bytes)?;
    let result = (|| {
        driver.htod(src, pattern.as_ptr().cast(), bytes)?;
        driver.set_current(b.context)?;
        let dst = driver.mem_alloc(bytes)?;
        let copied = (|| {
            driver.set_current(a.context)?;
            driver.memcpy_peer(dst, b.context, src, a.context, bytes)?;
            driver.synchronize()?;
            driver.set_current(b.context)?;
            let mut back = vec![0u8; bytes];
            driver.dtoh(back.as_mut_ptr().cast(), dst, bytes)?;
            Ok(pattern::mismatched(&pattern, &back))
        })();
        let _ = driver.set_current(b.context);
        driver.mem_free(dst);
        copied
    })();
    let _ = driver.set_current(a.context);
    driver.mem_free(src);
    result
}

/// The driver version in the file name of the library mapped into this process whose name
/// starts with `prefix` (`/usr/lib64/libcuda.so.550.54.15` in `/proc/self/maps`: the file the
/// soname link resolved to, whichever way it was found).
fn mapped_version(prefix: &str) -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    version_in_maps(&maps, prefix)
}

fn version_in_maps(maps: &str, prefix: &str) -> Option<String> {
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter_map(|path| path.rsplit('/').next())
        .filter_map(|name| name.strip_prefix(prefix))
        .find(|v| crate::text::is_driver_version(v))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_bad_samples() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(vec![f64::INFINITY, 5.0]), Some(5.0));
        assert_eq!(median(vec![]), None);
        assert_eq!(gbps(1_000_000_000, 1.0), 1.0);
    }

    #[test]
    fn a_missing_library_is_an_event_not_a_crash() {
        let events = std::sync::Mutex::new(Vec::new());
        let request = Request {
            library: "/nonexistent/libcuda.so.1".into(),
            ..Request::default()
        };
        let code = run(&request, &|e| events.lock().unwrap().push(e));
        assert_eq!(code, 0);
        let events = events.into_inner().unwrap();
        assert!(
            matches!(events[1], Event::LoadError { ref message } if message.contains("/nonexistent"))
        );
        assert_eq!(events.last(), Some(&Event::Done));
    }
}
