//! A stand-in `libcuda.so` for tests: it exports the CUDA driver API entry points gpudoctor's
//! CUDA probe loads (src/source/cuda/ffi.rs) and answers them from a gpudoctor `cuda.json`
//! (`CudaFacts`) named by `GPUDOCTOR_FAKE_CUDA_JSON`, read at every `cuInit`.
//!
//! How `cuda.json` becomes CUDA answers:
//! - `driver_version` → `cuDriverGetVersion` (default 12040); `init` → `cuInit`'s code;
//! - `devices`, in ordinal order → `cuDeviceGetCount`, their `bus_id` (given back upper case,
//!   as the driver prints it) and `name`;
//! - a device's `error {step, code}` → the call of that step returns `code` (`device`:
//!   `cuDeviceGet`; `context`: `cuDevicePrimaryCtxRetain`; `alloc`: `cuMemAlloc`; `copy_in`:
//!   `cuMemcpyHtoD`; `copy_out`: `cuMemcpyDtoH`);
//! - `timed_out: STEP` → the call of that step never returns (sleeps an hour);
//! - `mismatched_bytes: N` → `cuMemcpyDtoH` of the round trip changes N bytes;
//! - `copies` → host↔device copies from pinned memory take `bytes / gbps` on the GPU's clock
//!   (see below; nothing is copied above 16 MiB); an `error` fails that copy. Which placement a pinned buffer stands
//!   for: the first `cuMemHostAlloc` made under a device's context is `local`, the second
//!   `remote` — the order gpudoctor's probe measures in;
//! - `peers` `{from, to}` → `cuDeviceCanAccessPeer` answers `access` (false for a pair not
//!   listed), `cuMemcpyPeer` takes `bytes / gbps` and moves the bytes of allocations that hold
//!   them (the probe's verifying copy); `error` fails it; `mismatched_bytes: N` changes N bytes
//!   of what it moves; `timed_out` hangs `cuDeviceCanAccessPeer`.
//!
//! Time: the probe times copies with CUDA events (`cuEventRecord` around a copy,
//! `cuEventElapsedTime`). Here each context has a clock that only copies advance, by
//! `bytes / gbps` (25 GB/s host, 50 GB/s peer when the JSON has no figure); an event records
//! its context's clock. So a figure comes back exactly as recorded however loaded the test
//! machine is, and the copies cost no real time; hangs are real.
//!
//! - `CUDA_VISIBLE_DEVICES` is honoured as CUDA does: indexes, `GPU-`/`MIG-` UUIDs (a device's
//!   `uuid` and `mig_uuids`, which tests add), the list ending at the first entry that names
//!   nothing; nothing visible makes `cuInit` answer CUDA_ERROR_NO_DEVICE;
//! - `exclusive_process: true` → a second process's context on that GPU is refused with
//!   CUDA_ERROR_DEVICE_UNAVAILABLE while the first lives (`GPUDOCTOR_FAKE_CUDA_CONTEXTS=DIR`
//!   holds who has it).
//!
//! Knobs for tests that the JSON cannot say:
//! - `GPUDOCTOR_FAKE_CUDA_HANG=STEP[:BUS]` → that step hangs (on every device, or BUS only);
//!   `init` hangs `cuInit`;
//! - `GPUDOCTOR_FAKE_CUDA_CRASH=STEP[:BUS]` → that step aborts the process (a driver crash);
//! - `GPUDOCTOR_FAKE_CUDA_KILL=STEP[:BUS]` → that step SIGKILLs the process (the OOM killer);
//! - `GPUDOCTOR_FAKE_CUDA_GARBAGE=1` → `cuInit` first writes non-JSON text to stdout (a library
//!   that prints where the probe speaks);
//! - `GPUDOCTOR_FAKE_CUDA_ATTACH_MS=N` → `cuInit` takes N ms for every device in the JSON, in
//!   silence: without persistence mode it attaches every GPU, one after another.
//!
//! Nothing may unwind into C: every entry point runs inside `catch_unwind` and a panic becomes
//! `CUDA_ERROR_UNKNOWN`. Contexts are `ordinal + 1` as a pointer; device pointers are
//! `id << 32`.

#![allow(non_snake_case)]
// Every entry point's safety contract is cuda.h's: the pointers are valid for the documented
// types and sizes.
#![allow(clippy::missing_safety_doc)]

mod model;

use std::cell::Cell;
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use model::{Device, Facts};

type CuResult = c_int;
type CuContext = *mut c_void;
type CuDevicePtr = u64;

const SUCCESS: CuResult = 0;
const ERROR_INVALID_VALUE: CuResult = 1;
const ERROR_NOT_INITIALIZED: CuResult = 3;
const ERROR_NO_DEVICE: CuResult = 100;
/// cuda.h: `CUDA_ERROR_DEVICE_UNAVAILABLE`, what a second context on an Exclusive_Process GPU gets.
const ERROR_DEVICE_UNAVAILABLE: CuResult = 46;
const ERROR_INVALID_DEVICE: CuResult = 101;
const ERROR_INVALID_CONTEXT: CuResult = 201;
const ERROR_INVALID_HANDLE: CuResult = 400;
/// Speeds when the JSON gives none, GB/s.
const DEFAULT_HOST_GBPS: f64 = 25.0;
const DEFAULT_PEER_GBPS: f64 = 50.0;
const ERROR_UNKNOWN: CuResult = 999;

pub const ENV_JSON: &str = "GPUDOCTOR_FAKE_CUDA_JSON";
pub const ENV_HANG: &str = "GPUDOCTOR_FAKE_CUDA_HANG";
pub const ENV_CRASH: &str = "GPUDOCTOR_FAKE_CUDA_CRASH";
pub const ENV_GARBAGE: &str = "GPUDOCTOR_FAKE_CUDA_GARBAGE";
pub const ENV_ATTACH_MS: &str = "GPUDOCTOR_FAKE_CUDA_ATTACH_MS";
pub const ENV_KILL: &str = "GPUDOCTOR_FAKE_CUDA_KILL";
pub const ENV_CONTEXTS: &str = "GPUDOCTOR_FAKE_CUDA_CONTEXTS";

/// Device allocations up to this size hold real bytes (the round trip); larger ones are only
/// sizes (the bandwidth buffers), so tests do not need gigabytes.
const REAL_BYTES: usize = 16 << 20;

struct DeviceAlloc {
    ordinal: u32,
    bytes: Vec<u8>,
}

struct HostAlloc {
    ordinal: u32,
    placement: &'static str,
    len: usize,
}

#[derive(Default)]
struct State {
    facts: Option<Facts>,
    next_id: u64,
    device_allocs: BTreeMap<u64, DeviceAlloc>,
    host_allocs: BTreeMap<usize, HostAlloc>,
    /// `cuMemHostAlloc` calls per device: the first is local, the second remote.
    host_allocs_made: BTreeMap<u32, u32>,
    /// Each context's clock, seconds: advanced by copies only.
    clocks: BTreeMap<u32, f64>,
    /// Events by id: the context and clock they recorded, once recorded.
    events: BTreeMap<u64, Option<f64>>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

thread_local! {
    static CURRENT: Cell<Option<u32>> = const { Cell::new(None) };
}

fn state() -> MutexGuard<'static, Option<State>> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

fn guard(body: impl FnOnce() -> CuResult) -> CuResult {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(ERROR_UNKNOWN)
}

/// `STEP[:BUS]` from `var` matches this step (and bus)?
fn told(var: &str, step: &str, bus: Option<&str>) -> bool {
    let Ok(spec) = std::env::var(var) else {
        return false;
    };
    let (s, b) = match spec.split_once(':') {
        Some((s, b)) => (s, Some(b)),
        None => (spec.as_str(), None),
    };
    s == step
        && match (b, bus) {
            (None, _) => true,
            (Some(b), Some(bus)) => b.eq_ignore_ascii_case(bus),
            (Some(_), None) => false,
        }
}

fn hang() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// Hang or crash if the JSON or the environment says so for this step. Outside any lock.
fn at_step(step: &str, device: Option<&Device>) {
    let bus = device.and_then(|d| d.bus_id.as_deref());
    if told(ENV_CRASH, step, bus) {
        std::process::abort();
    }
    if told(ENV_KILL, step, bus) {
        unsafe extern "C" {
            fn kill(pid: i32, sig: i32) -> i32;
        }
        // SIGKILL, as the kernel's OOM killer sends it.
        // SAFETY: kill(2) on this process's own pid.
        unsafe { kill(std::process::id() as i32, 9) };
    }
    if told(ENV_HANG, step, bus) || device.is_some_and(|d| d.timed_out.as_deref() == Some(step)) {
        hang();
    }
}

/// The recorded error of a device at a step.
fn error_at(device: &Device, step: &str) -> Option<CuResult> {
    device
        .error
        .as_ref()
        .filter(|e| e.step == step)
        .map(|e| e.code)
}

fn device_copy(ordinal: u32) -> Option<Device> {
    let st = state();
    let facts = st.as_ref()?.facts.as_ref()?;
    facts.devices.get(ordinal as usize).cloned()
}

/// Advance the current context's clock by the time `bytes` take at `gbps`.
fn spend(bytes: usize, gbps: Option<f64>, default: f64) {
    let g = gbps
        .filter(|g| *g > 0.0 && g.is_finite())
        .unwrap_or(default);
    let Some(ordinal) = current() else {
        return;
    };
    if let Some(st) = state().as_mut() {
        *st.clocks.entry(ordinal).or_default() += bytes as f64 / (g * 1e9);
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventCreate(event: *mut *mut c_void, _flags: c_uint) -> CuResult {
    guard(|| {
        if event.is_null() {
            return ERROR_INVALID_VALUE;
        }
        let mut st = state();
        let Some(st) = st.as_mut() else {
            return ERROR_NOT_INITIALIZED;
        };
        st.next_id += 1;
        let id = st.next_id;
        st.events.insert(id, None);
        // SAFETY: a valid out pointer.
        unsafe { event.write(std::ptr::without_provenance_mut(id as usize)) };
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventRecord(event: *mut c_void, _stream: *mut c_void) -> CuResult {
    guard(|| {
        let Some(ordinal) = current() else {
            return ERROR_INVALID_CONTEXT;
        };
        let mut st = state();
        let Some(st) = st.as_mut() else {
            return ERROR_NOT_INITIALIZED;
        };
        let now = st.clocks.get(&ordinal).copied().unwrap_or(0.0);
        match st.events.get_mut(&(event.addr() as u64)) {
            Some(slot) => {
                *slot = Some(now);
                SUCCESS
            }
            None => ERROR_INVALID_HANDLE,
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventSynchronize(_event: *mut c_void) -> CuResult {
    SUCCESS
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventElapsedTime(
    ms: *mut f32,
    start: *mut c_void,
    stop: *mut c_void,
) -> CuResult {
    guard(|| {
        if ms.is_null() {
            return ERROR_INVALID_VALUE;
        }
        let st = state();
        let Some(st) = st.as_ref() else {
            return ERROR_NOT_INITIALIZED;
        };
        let stamp = |e: *mut c_void| st.events.get(&(e.addr() as u64)).copied().flatten();
        match (stamp(start), stamp(stop)) {
            (Some(a), Some(b)) => {
                // SAFETY: a valid out pointer.
                unsafe { ms.write(((b - a) * 1000.0) as f32) };
                SUCCESS
            }
            _ => ERROR_INVALID_HANDLE,
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventDestroy_v2(event: *mut c_void) -> CuResult {
    guard(|| {
        if let Some(st) = state().as_mut() {
            st.events.remove(&(event.addr() as u64));
        }
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuInit(_flags: c_uint) -> CuResult {
    at_step("init", None);
    if std::env::var_os(ENV_GARBAGE).is_some() {
        println!("fake-cuda: this line is not an event");
    }
    guard(|| {
        let loaded = std::env::var_os(ENV_JSON)
            .ok_or_else(|| format!("{ENV_JSON} is not set"))
            .and_then(|p| std::fs::read_to_string(&p).map_err(|e| e.to_string()))
            .and_then(|t| model::parse(&t));
        let mut facts = match loaded {
            Ok(f) => f,
            Err(why) => {
                eprintln!("fake-cuda: {why}");
                return ERROR_UNKNOWN;
            }
        };
        let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
        let all = std::mem::take(&mut facts.devices);
        facts.devices = model::visible_devices(all, visible.as_deref());
        if let Some(ms) = std::env::var(ENV_ATTACH_MS)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            std::thread::sleep(Duration::from_millis(ms * facts.devices.len() as u64));
        }
        // CUDA with nothing visible: cuInit answers CUDA_ERROR_NO_DEVICE.
        let code = match facts.init.unwrap_or(SUCCESS) {
            SUCCESS if facts.devices.is_empty() && visible.is_some() => ERROR_NO_DEVICE,
            code => code,
        };
        *state() = Some(State {
            facts: Some(facts),
            ..State::default()
        });
        code
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDriverGetVersion(version: *mut c_int) -> CuResult {
    guard(|| {
        if version.is_null() {
            return ERROR_INVALID_VALUE;
        }
        // Asked before cuInit: read the file for it too.
        let v = std::env::var_os(ENV_JSON)
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|t| model::parse(&t).ok())
            .and_then(|f| f.driver_version)
            .unwrap_or(12040);
        // SAFETY: a valid out pointer (cuda.h).
        unsafe { version.write(v) };
        SUCCESS
    })
}

fn with_facts(body: impl FnOnce(&Facts) -> CuResult) -> CuResult {
    let st = state();
    match st.as_ref().and_then(|s| s.facts.as_ref()) {
        Some(f) => body(f),
        None => ERROR_NOT_INITIALIZED,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetCount(count: *mut c_int) -> CuResult {
    guard(|| {
        with_facts(|f| {
            if count.is_null() {
                return ERROR_INVALID_VALUE;
            }
            // SAFETY: a valid out pointer.
            unsafe { count.write(f.devices.len() as c_int) };
            SUCCESS
        })
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGet(device: *mut c_int, ordinal: c_int) -> CuResult {
    let dev = u32::try_from(ordinal).ok().and_then(device_copy);
    at_step("device", dev.as_ref());
    guard(|| {
        let Some(dev) = dev else {
            return ERROR_INVALID_DEVICE;
        };
        if let Some(code) = error_at(&dev, "device") {
            return code;
        }
        if device.is_null() {
            return ERROR_INVALID_VALUE;
        }
        // SAFETY: a valid out pointer.
        unsafe { device.write(ordinal) };
        SUCCESS
    })
}

fn put_str(buf: *mut c_char, len: c_int, text: &str) -> CuResult {
    if buf.is_null() || len <= 0 {
        return ERROR_INVALID_VALUE;
    }
    let bytes = text.as_bytes();
    let n = bytes.len().min(len as usize - 1);
    // SAFETY: the caller's buffer holds `len` bytes (cuda.h).
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), buf, n);
        buf.add(n).write(0);
    }
    SUCCESS
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: c_int) -> CuResult {
    guard(|| match u32::try_from(dev).ok().and_then(device_copy) {
        Some(d) => put_str(name, len, d.name.as_deref().unwrap_or("NVIDIA Fake GPU")),
        None => ERROR_INVALID_DEVICE,
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetPCIBusId(bus: *mut c_char, len: c_int, dev: c_int) -> CuResult {
    guard(|| match u32::try_from(dev).ok().and_then(device_copy) {
        Some(d) => put_str(
            bus,
            len,
            &d.bus_id
                .as_deref()
                .unwrap_or("0000:00:00.0")
                .to_ascii_uppercase(),
        ),
        None => ERROR_INVALID_DEVICE,
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxRetain(ctx: *mut CuContext, dev: c_int) -> CuResult {
    let device = u32::try_from(dev).ok().and_then(device_copy);
    at_step("context", device.as_ref());
    guard(|| {
        let Some(device) = device else {
            return ERROR_INVALID_DEVICE;
        };
        if let Some(code) = error_at(&device, "context") {
            return code;
        }
        if device.exclusive_process && !take_exclusive(&device) {
            return ERROR_DEVICE_UNAVAILABLE;
        }
        if ctx.is_null() {
            return ERROR_INVALID_VALUE;
        }
        // SAFETY: a valid out pointer.
        unsafe { ctx.write(std::ptr::without_provenance_mut(dev as usize + 1)) };
        SUCCESS
    })
}

/// Exclusive_Process across processes, through `GPUDOCTOR_FAKE_CUDA_CONTEXTS=DIR`: the process
/// holding a context on the GPU is named in `DIR/<bus id>.pid`. Another live process there
/// refuses this one; a pid that is gone (or none) lets it take the GPU. Without the directory
/// nothing holds the GPU.
fn take_exclusive(device: &Device) -> bool {
    let (Some(dir), Some(bus)) = (std::env::var_os(ENV_CONTEXTS), device.bus_id.as_deref()) else {
        return true;
    };
    let file = std::path::Path::new(&dir).join(format!("{}.pid", bus.to_ascii_lowercase()));
    let me = std::process::id();
    if let Some(holder) = std::fs::read_to_string(&file)
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok())
        && holder != me
        && std::path::Path::new(&format!("/proc/{holder}")).exists()
    {
        return false;
    }
    std::fs::write(&file, me.to_string()).is_ok()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxRelease_v2(_dev: c_int) -> CuResult {
    SUCCESS
}

fn ctx_ordinal(ctx: CuContext) -> Option<u32> {
    u32::try_from(ctx.addr().checked_sub(1)?).ok()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxSetCurrent(ctx: CuContext) -> CuResult {
    guard(|| match ctx_ordinal(ctx) {
        Some(o) => {
            CURRENT.with(|c| c.set(Some(o)));
            SUCCESS
        }
        None => ERROR_INVALID_CONTEXT,
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxSynchronize() -> CuResult {
    SUCCESS
}

fn current() -> Option<u32> {
    CURRENT.with(|c| c.get())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAlloc_v2(ptr: *mut CuDevicePtr, bytes: usize) -> CuResult {
    let Some(ordinal) = current() else {
        return ERROR_INVALID_CONTEXT;
    };
    let device = device_copy(ordinal);
    at_step("alloc", device.as_ref());
    guard(|| {
        if let Some(code) = device.as_ref().and_then(|d| error_at(d, "alloc")) {
            return code;
        }
        if ptr.is_null() {
            return ERROR_INVALID_VALUE;
        }
        let mut st = state();
        let Some(st) = st.as_mut() else {
            return ERROR_NOT_INITIALIZED;
        };
        st.next_id += 1;
        let id = st.next_id;
        let storage = if bytes <= REAL_BYTES {
            vec![0u8; bytes]
        } else {
            Vec::new()
        };
        st.device_allocs.insert(
            id,
            DeviceAlloc {
                ordinal,
                bytes: storage,
            },
        );
        // SAFETY: a valid out pointer.
        unsafe { ptr.write(id << 32) };
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemFree_v2(ptr: CuDevicePtr) -> CuResult {
    guard(|| {
        if let Some(st) = state().as_mut() {
            st.device_allocs.remove(&(ptr >> 32));
        }
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemHostAlloc(
    pp: *mut *mut c_void,
    bytes: usize,
    _flags: c_uint,
) -> CuResult {
    let Some(ordinal) = current() else {
        return ERROR_INVALID_CONTEXT;
    };
    let device = device_copy(ordinal);
    at_step("host_alloc", device.as_ref());
    guard(|| {
        if pp.is_null() || bytes == 0 {
            return ERROR_INVALID_VALUE;
        }
        let mut st = state();
        let Some(st) = st.as_mut() else {
            return ERROR_NOT_INITIALIZED;
        };
        let made = st.host_allocs_made.entry(ordinal).or_default();
        let placement = if *made == 0 { "local" } else { "remote" };
        *made += 1;
        // Zeroed and never touched by the probe: the pages stay unbacked.
        let buf = vec![0u8; bytes].into_boxed_slice();
        let raw = Box::into_raw(buf) as *mut u8;
        st.host_allocs.insert(
            raw as usize,
            HostAlloc {
                ordinal,
                placement,
                len: bytes,
            },
        );
        // SAFETY: a valid out pointer.
        unsafe { pp.write(raw.cast()) };
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemFreeHost(p: *mut c_void) -> CuResult {
    guard(|| {
        let removed = state()
            .as_mut()
            .and_then(|st| st.host_allocs.remove(&(p as usize)));
        if let Some(alloc) = removed {
            let _ = alloc.ordinal;
            // SAFETY: made by `Box::into_raw` of a boxed slice of `len` bytes above.
            drop(unsafe {
                Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                    p.cast::<u8>(),
                    alloc.len,
                ))
            });
        }
        SUCCESS
    })
}

/// The recorded copy of `ordinal` for a direction and placement.
fn copy_of(ordinal: u32, direction: &str, placement: &str) -> Option<model::HostCopy> {
    device_copy(ordinal)?
        .copies
        .into_iter()
        .find(|c| c.direction == direction && c.placement == placement)
}

/// One host↔device copy: `host` is the host pointer, `dev` the device pointer.
fn host_copy(direction: &str, host: *mut u8, dev: CuDevicePtr, bytes: usize) -> CuResult {
    let (ordinal, placement) = {
        let st = state();
        let Some(st) = st.as_ref() else {
            return ERROR_NOT_INITIALIZED;
        };
        let Some(alloc) = st.device_allocs.get(&(dev >> 32)) else {
            return ERROR_INVALID_VALUE;
        };
        let placement = st.host_allocs.get(&(host as usize)).map(|h| h.placement);
        (alloc.ordinal, placement)
    };
    let device = device_copy(ordinal);
    let step = if direction == "h2d" {
        "copy_in"
    } else {
        "copy_out"
    };
    match placement {
        // The round trip: a plain host buffer.
        None => {
            at_step(step, device.as_ref());
            if let Some(code) = device.as_ref().and_then(|d| error_at(d, step)) {
                return code;
            }
        }
        Some(p) => {
            at_step(direction, device.as_ref());
            let recorded = copy_of(ordinal, direction, p);
            if let Some(e) = recorded.as_ref().and_then(|c| c.error.as_ref()) {
                return e.code;
            }
            spend(bytes, recorded.and_then(|c| c.gbps), DEFAULT_HOST_GBPS);
            return SUCCESS;
        }
    }
    let mut st = state();
    let Some(st) = st.as_mut() else {
        return ERROR_NOT_INITIALIZED;
    };
    let Some(alloc) = st.device_allocs.get_mut(&(dev >> 32)) else {
        return ERROR_INVALID_VALUE;
    };
    if alloc.bytes.len() < bytes {
        return ERROR_INVALID_VALUE;
    }
    // SAFETY: the caller's host buffer holds `bytes` bytes (cuda.h).
    let host = unsafe { std::slice::from_raw_parts_mut(host, bytes) };
    if direction == "h2d" {
        alloc.bytes[..bytes].copy_from_slice(host);
    } else {
        host.copy_from_slice(&alloc.bytes[..bytes]);
        let wrong = device
            .as_ref()
            .and_then(|d| d.mismatched_bytes)
            .unwrap_or(0)
            .min(bytes as u64) as usize;
        for b in host.iter_mut().take(wrong) {
            *b ^= 0xff;
        }
    }
    SUCCESS
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyHtoD_v2(
    dst: CuDevicePtr,
    src: *const c_void,
    bytes: usize,
) -> CuResult {
    guard(|| host_copy("h2d", src as *mut u8, dst, bytes))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyDtoH_v2(
    dst: *mut c_void,
    src: CuDevicePtr,
    bytes: usize,
) -> CuResult {
    guard(|| host_copy("d2h", dst.cast(), src, bytes))
}

fn bus_of(ordinal: u32) -> Option<String> {
    device_copy(ordinal)?.bus_id
}

fn peer_entry(from: u32, to: u32) -> Option<model::Peer> {
    let (a, b) = (bus_of(from)?, bus_of(to)?);
    let st = state();
    let facts = st.as_ref()?.facts.as_ref()?;
    facts
        .peers
        .iter()
        .find(|p| p.from.eq_ignore_ascii_case(&a) && p.to.eq_ignore_ascii_case(&b))
        .cloned()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceCanAccessPeer(
    can: *mut c_int,
    dev: c_int,
    peer: c_int,
) -> CuResult {
    let entry = match (u32::try_from(dev), u32::try_from(peer)) {
        (Ok(a), Ok(b)) => peer_entry(a, b),
        _ => None,
    };
    if entry.as_ref().is_some_and(|e| e.timed_out) {
        hang();
    }
    let from = u32::try_from(dev).ok().and_then(device_copy);
    at_step("peer", from.as_ref());
    guard(|| {
        if can.is_null() {
            return ERROR_INVALID_VALUE;
        }
        let access = entry.and_then(|e| e.access).unwrap_or(false);
        // SAFETY: a valid out pointer.
        unsafe { can.write(c_int::from(access)) };
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxEnablePeerAccess(_peer: CuContext, _flags: c_uint) -> CuResult {
    SUCCESS
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyPeer(
    dst: CuDevicePtr,
    dst_ctx: CuContext,
    src: CuDevicePtr,
    src_ctx: CuContext,
    bytes: usize,
) -> CuResult {
    guard(|| {
        let (Some(from), Some(to)) = (ctx_ordinal(src_ctx), ctx_ordinal(dst_ctx)) else {
            return ERROR_INVALID_CONTEXT;
        };
        let entry = peer_entry(from, to);
        if let Some(e) = entry.as_ref().and_then(|e| e.error.as_ref()) {
            return e.code;
        }
        let wrong = entry.as_ref().and_then(|e| e.mismatched_bytes).unwrap_or(0);
        spend(bytes, entry.and_then(|e| e.gbps), DEFAULT_PEER_GBPS);
        copy_between_devices(dst, src, bytes, wrong)
    })
}

/// Move the bytes of a peer copy between two allocations that hold real bytes (the verifying
/// copy), changing the first `wrong` of them; the large timed copies hold none.
fn copy_between_devices(dst: CuDevicePtr, src: CuDevicePtr, bytes: usize, wrong: u64) -> CuResult {
    let mut st = state();
    let Some(st) = st.as_mut() else {
        return ERROR_NOT_INITIALIZED;
    };
    let Some(from) = st.device_allocs.get(&(src >> 32)) else {
        return ERROR_INVALID_VALUE;
    };
    if from.bytes.len() < bytes {
        return SUCCESS;
    }
    let mut data = from.bytes[..bytes].to_vec();
    for b in data.iter_mut().take(wrong.min(bytes as u64) as usize) {
        *b ^= 0xa5;
    }
    match st.device_allocs.get_mut(&(dst >> 32)) {
        Some(to) if to.bytes.len() >= bytes => {
            to.bytes[..bytes].copy_from_slice(&data);
            SUCCESS
        }
        Some(_) => SUCCESS,
        None => ERROR_INVALID_VALUE,
    }
}
