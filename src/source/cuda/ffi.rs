//! The CUDA driver API calls the probe makes, loaded at run time from `libcuda.so.1` (or
//! `--cuda-lib`) with libloading: nothing CUDA is needed to build gpudoctor, and a node without
//! the library is a fact to report, not a start-up failure.
//!
//! Why not cudarc: its loader picks the library by name only and panics when it is missing,
//! while the probe needs a path (the stand-in library in tests, `--cuda-lib`) and errors as data;
//! the eighteen declarations below are all it would give us. libloading is already in the tree
//! (nvml-wrapper loads NVML with it).
//!
//! Copies are timed with CUDA events on the GPU (`cuEventRecord` around them,
//! `cuEventElapsedTime`), as NVIDIA's bandwidthTest and nvbandwidth do.
//!
//! Declarations follow `cuda.h` (CUDA 12): the `_v2` entry points are the ones the header maps
//! the plain names to since CUDA 3.2 (64-bit `CUdeviceptr`, `size_t` sizes); the primary
//! context is what the CUDA runtime and frameworks use, so a context that fails here fails for
//! them too.

use std::ffi::{c_char, c_int, c_uint, c_void};

use libloading::Library;

pub type CuResult = c_int;
pub type CuDevice = c_int;
pub type CuContext = *mut c_void;
pub type CuDevicePtr = u64;
pub type CuEvent = *mut c_void;
/// The legacy default stream (`0`): copies and events on it run in issue order.
pub const NULL_STREAM: *mut c_void = std::ptr::null_mut();

/// `CU_MEMHOSTALLOC_PORTABLE`: pinned memory usable from every context (the peer and NUMA
/// threads use other contexts than the allocating one).
pub const CU_MEMHOSTALLOC_PORTABLE: c_uint = 0x01;

type FnInit = unsafe extern "C" fn(c_uint) -> CuResult;
type FnIntOut = unsafe extern "C" fn(*mut c_int) -> CuResult;
type FnDeviceGet = unsafe extern "C" fn(*mut CuDevice, c_int) -> CuResult;
type FnDeviceString = unsafe extern "C" fn(*mut c_char, c_int, CuDevice) -> CuResult;
type FnCtxRetain = unsafe extern "C" fn(*mut CuContext, CuDevice) -> CuResult;
type FnCtxRelease = unsafe extern "C" fn(CuDevice) -> CuResult;
type FnCtxSet = unsafe extern "C" fn(CuContext) -> CuResult;
type FnVoid = unsafe extern "C" fn() -> CuResult;
type FnMemAlloc = unsafe extern "C" fn(*mut CuDevicePtr, usize) -> CuResult;
type FnMemFree = unsafe extern "C" fn(CuDevicePtr) -> CuResult;
type FnHtoD = unsafe extern "C" fn(CuDevicePtr, *const c_void, usize) -> CuResult;
type FnDtoH = unsafe extern "C" fn(*mut c_void, CuDevicePtr, usize) -> CuResult;
type FnHostAlloc = unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> CuResult;
type FnHostFree = unsafe extern "C" fn(*mut c_void) -> CuResult;
type FnCanAccess = unsafe extern "C" fn(*mut c_int, CuDevice, CuDevice) -> CuResult;
type FnEnablePeer = unsafe extern "C" fn(CuContext, c_uint) -> CuResult;
type FnMemcpyPeer =
    unsafe extern "C" fn(CuDevicePtr, CuContext, CuDevicePtr, CuContext, usize) -> CuResult;
type FnEventCreate = unsafe extern "C" fn(*mut CuEvent, c_uint) -> CuResult;
type FnEventRecord = unsafe extern "C" fn(CuEvent, *mut c_void) -> CuResult;
type FnEvent = unsafe extern "C" fn(CuEvent) -> CuResult;
type FnEventElapsed = unsafe extern "C" fn(*mut f32, CuEvent, CuEvent) -> CuResult;

/// The loaded library and its entry points. Every call is `unsafe` in the C sense only through
/// the pointers passed; the wrappers below pass valid ones.
pub struct Driver {
    // Kept alive while the function pointers are used.
    _lib: Library,
    init: FnInit,
    driver_get_version: FnIntOut,
    device_get_count: FnIntOut,
    device_get: FnDeviceGet,
    device_get_name: FnDeviceString,
    device_get_pci_bus_id: FnDeviceString,
    primary_ctx_retain: FnCtxRetain,
    primary_ctx_release: FnCtxRelease,
    ctx_set_current: FnCtxSet,
    ctx_synchronize: FnVoid,
    mem_alloc: FnMemAlloc,
    mem_free: FnMemFree,
    memcpy_htod: FnHtoD,
    memcpy_dtoh: FnDtoH,
    mem_host_alloc: FnHostAlloc,
    mem_free_host: FnHostFree,
    can_access_peer: FnCanAccess,
    enable_peer_access: FnEnablePeer,
    memcpy_peer: FnMemcpyPeer,
    event_create: FnEventCreate,
    event_record: FnEventRecord,
    event_synchronize: FnEvent,
    event_elapsed: FnEventElapsed,
    event_destroy: FnEvent,
}

// SAFETY: the CUDA driver API is thread-safe (CUDA programming guide, "Multithreaded
// programming": contexts may be made current on several threads); the pointers are plain
// function pointers into a library that stays loaded as long as `Driver` lives.
unsafe impl Send for Driver {}
unsafe impl Sync for Driver {}

/// Look up one symbol, trying each name in turn (newer entry points first).
fn symbol<T: Copy>(lib: &Library, names: &[&str]) -> Result<T, String> {
    for name in names {
        let mut z = name.as_bytes().to_vec();
        z.push(0);
        // SAFETY: the type `T` is the declared C signature of that entry point (cuda.h).
        if let Ok(sym) = unsafe { lib.get::<T>(&z) } {
            return Ok(*sym);
        }
    }
    Err(format!("the library has no `{}`", names.join("` or `")))
}

/// A C string buffer filled by the driver, up to its NUL.
fn c_text(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn check(code: CuResult) -> Result<(), CuResult> {
    if code == 0 { Ok(()) } else { Err(code) }
}

impl Driver {
    /// Load `path` (a file name is looked up by the dynamic loader, like `dlopen`).
    pub fn load(path: &str) -> Result<Driver, String> {
        // SAFETY: loading a shared library runs its initialisers; libcuda's are the driver's.
        let lib = unsafe { Library::new(path) }.map_err(|e| e.to_string())?;
        Ok(Driver {
            init: symbol(&lib, &["cuInit"])?,
            driver_get_version: symbol(&lib, &["cuDriverGetVersion"])?,
            device_get_count: symbol(&lib, &["cuDeviceGetCount"])?,
            device_get: symbol(&lib, &["cuDeviceGet"])?,
            device_get_name: symbol(&lib, &["cuDeviceGetName"])?,
            device_get_pci_bus_id: symbol(&lib, &["cuDeviceGetPCIBusId"])?,
            primary_ctx_retain: symbol(&lib, &["cuDevicePrimaryCtxRetain"])?,
            primary_ctx_release: symbol(
                &lib,
                &["cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"],
            )?,
            ctx_set_current: symbol(&lib, &["cuCtxSetCurrent"])?,
            ctx_synchronize: symbol(&lib, &["cuCtxSynchronize"])?,
            mem_alloc: symbol(&lib, &["cuMemAlloc_v2"])?,
            mem_free: symbol(&lib, &["cuMemFree_v2"])?,
            memcpy_htod: symbol(&lib, &["cuMemcpyHtoD_v2"])?,
            memcpy_dtoh: symbol(&lib, &["cuMemcpyDtoH_v2"])?,
            mem_host_alloc: symbol(&lib, &["cuMemHostAlloc"])?,
            mem_free_host: symbol(&lib, &["cuMemFreeHost"])?,
            can_access_peer: symbol(&lib, &["cuDeviceCanAccessPeer"])?,
            enable_peer_access: symbol(&lib, &["cuCtxEnablePeerAccess"])?,
            memcpy_peer: symbol(&lib, &["cuMemcpyPeer"])?,
            event_create: symbol(&lib, &["cuEventCreate"])?,
            event_record: symbol(&lib, &["cuEventRecord"])?,
            event_synchronize: symbol(&lib, &["cuEventSynchronize"])?,
            event_elapsed: symbol(&lib, &["cuEventElapsedTime"])?,
            event_destroy: symbol(&lib, &["cuEventDestroy_v2", "cuEventDestroy"])?,
            _lib: lib,
        })
    }

    pub fn init(&self) -> Result<(), CuResult> {
        // SAFETY: flags must be 0 (cuda.h).
        check(unsafe { (self.init)(0) })
    }

    pub fn driver_version(&self) -> Result<i32, CuResult> {
        let mut v: c_int = 0;
        // SAFETY: a valid out pointer.
        check(unsafe { (self.driver_get_version)(&mut v) })?;
        Ok(v)
    }

    pub fn device_count(&self) -> Result<u32, CuResult> {
        let mut n: c_int = 0;
        // SAFETY: a valid out pointer.
        check(unsafe { (self.device_get_count)(&mut n) })?;
        Ok(n.max(0) as u32)
    }

    pub fn device(&self, ordinal: u32) -> Result<CuDevice, CuResult> {
        let mut d: CuDevice = 0;
        // SAFETY: a valid out pointer.
        check(unsafe { (self.device_get)(&mut d, ordinal as c_int) })?;
        Ok(d)
    }

    pub fn name(&self, dev: CuDevice) -> Result<String, CuResult> {
        let mut buf = [0 as c_char; 256];
        // SAFETY: the buffer holds `len` bytes.
        check(unsafe { (self.device_get_name)(buf.as_mut_ptr(), buf.len() as c_int, dev) })?;
        Ok(c_text(&buf))
    }

    pub fn pci_bus_id(&self, dev: CuDevice) -> Result<String, CuResult> {
        // cuda.h: "at least 13" bytes for `domain:bus:device.function`.
        let mut buf = [0 as c_char; 64];
        // SAFETY: the buffer holds `len` bytes.
        check(unsafe { (self.device_get_pci_bus_id)(buf.as_mut_ptr(), buf.len() as c_int, dev) })?;
        Ok(c_text(&buf))
    }

    pub fn retain_primary(&self, dev: CuDevice) -> Result<CuContext, CuResult> {
        let mut ctx: CuContext = std::ptr::null_mut();
        // SAFETY: a valid out pointer.
        check(unsafe { (self.primary_ctx_retain)(&mut ctx, dev) })?;
        Ok(ctx)
    }

    pub fn release_primary(&self, dev: CuDevice) {
        // SAFETY: releases a retain made by `retain_primary`.
        let _ = unsafe { (self.primary_ctx_release)(dev) };
    }

    pub fn set_current(&self, ctx: CuContext) -> Result<(), CuResult> {
        // SAFETY: a context returned by the driver.
        check(unsafe { (self.ctx_set_current)(ctx) })
    }

    pub fn synchronize(&self) -> Result<(), CuResult> {
        // SAFETY: no arguments.
        check(unsafe { (self.ctx_synchronize)() })
    }

    pub fn mem_alloc(&self, bytes: usize) -> Result<CuDevicePtr, CuResult> {
        let mut p: CuDevicePtr = 0;
        // SAFETY: a valid out pointer.
        check(unsafe { (self.mem_alloc)(&mut p, bytes) })?;
        Ok(p)
    }

    pub fn mem_free(&self, p: CuDevicePtr) {
        // SAFETY: frees an allocation made by `mem_alloc`.
        let _ = unsafe { (self.mem_free)(p) };
    }

    /// Copy `src` (host) to device memory `dst` (at least `src.len()` bytes).
    pub fn htod(&self, dst: CuDevicePtr, src: *const c_void, bytes: usize) -> Result<(), CuResult> {
        // SAFETY: the caller passes a host buffer of `bytes` and a device allocation as large.
        check(unsafe { (self.memcpy_htod)(dst, src, bytes) })
    }

    pub fn dtoh(&self, dst: *mut c_void, src: CuDevicePtr, bytes: usize) -> Result<(), CuResult> {
        // SAFETY: as `htod`, the other way.
        check(unsafe { (self.memcpy_dtoh)(dst, src, bytes) })
    }

    pub fn host_alloc(&self, bytes: usize) -> Result<*mut c_void, CuResult> {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: a valid out pointer.
        check(unsafe { (self.mem_host_alloc)(&mut p, bytes, CU_MEMHOSTALLOC_PORTABLE) })?;
        Ok(p)
    }

    pub fn host_free(&self, p: *mut c_void) {
        // SAFETY: frees memory from `host_alloc`.
        let _ = unsafe { (self.mem_free_host)(p) };
    }

    pub fn can_access_peer(&self, dev: CuDevice, peer: CuDevice) -> Result<bool, CuResult> {
        let mut can: c_int = 0;
        // SAFETY: a valid out pointer.
        check(unsafe { (self.can_access_peer)(&mut can, dev, peer) })?;
        Ok(can != 0)
    }

    /// Let the current context access `peer`'s memory; "already enabled" is success.
    pub fn enable_peer_access(&self, peer: CuContext) -> Result<(), CuResult> {
        // SAFETY: a context returned by the driver; flags must be 0.
        match unsafe { (self.enable_peer_access)(peer, 0) } {
            0 | 704 => Ok(()),
            code => Err(code),
        }
    }

    /// Time `work` on the current context's default stream with two events, in seconds: the
    /// GPU's own clock (what `bandwidthTest` and nvbandwidth read), not the host's, so a busy
    /// host does not lower the figure.
    pub fn timed(&self, work: &mut dyn FnMut() -> Result<(), CuResult>) -> Result<f64, CuResult> {
        let mut start: CuEvent = std::ptr::null_mut();
        let mut stop: CuEvent = std::ptr::null_mut();
        // SAFETY: valid out pointers; flags 0 = CU_EVENT_DEFAULT (timing enabled).
        check(unsafe { (self.event_create)(&mut start, 0) })?;
        // SAFETY: as above.
        if let Err(c) = check(unsafe { (self.event_create)(&mut stop, 0) }) {
            // SAFETY: an event created above.
            unsafe { (self.event_destroy)(start) };
            return Err(c);
        }
        let result = (|| {
            // SAFETY: events created above, recorded on the default stream.
            check(unsafe { (self.event_record)(start, NULL_STREAM) })?;
            work()?;
            // SAFETY: as above.
            check(unsafe { (self.event_record)(stop, NULL_STREAM) })?;
            // SAFETY: as above.
            check(unsafe { (self.event_synchronize)(stop) })?;
            let mut ms: f32 = 0.0;
            // SAFETY: a valid out pointer and two recorded, completed events.
            check(unsafe { (self.event_elapsed)(&mut ms, start, stop) })?;
            Ok(f64::from(ms) / 1000.0)
        })();
        // SAFETY: events created above, no longer used.
        unsafe {
            (self.event_destroy)(start);
            (self.event_destroy)(stop);
        }
        result
    }

    pub fn memcpy_peer(
        &self,
        dst: CuDevicePtr,
        dst_ctx: CuContext,
        src: CuDevicePtr,
        src_ctx: CuContext,
        bytes: usize,
    ) -> Result<(), CuResult> {
        // SAFETY: allocations of at least `bytes` in the named contexts.
        check(unsafe { (self.memcpy_peer)(dst, dst_ctx, src, src_ctx, bytes) })
    }
}
