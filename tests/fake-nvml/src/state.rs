//! The answers' source and the plumbing every entry point shares: the `nvml.json` loaded at
//! `nvmlInit*` (reference-counted until the last `nvmlShutdown`), the panic guard, and the
//! handle checks that find the GPU, MIG device or NVLink a call is about.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Mutex, MutexGuard};

use super::*;

/// `nvmlDevice_t`: an opaque pointer; here `index + 1`.
pub(crate) type Handle = *mut c_void;

pub(crate) type Answer = Result<(), NvmlReturn>;

pub(crate) struct State {
    /// `nvmlInit*` calls not yet matched by `nvmlShutdown` (NVML reference-counts them).
    pub(crate) refs: u32,
    pub(crate) facts: Option<Facts>,
}

static STATE: Mutex<State> = Mutex::new(State {
    refs: 0,
    facts: None,
});

pub(crate) fn state() -> MutexGuard<'static, State> {
    // A panic while holding the lock leaves plain data behind; carry on with it.
    STATE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Run an entry point's body; a panic becomes `NVML_ERROR_UNKNOWN` instead of crossing into C.
pub(crate) fn guard(body: impl FnOnce() -> Answer) -> NvmlReturn {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => SUCCESS,
        Ok(Err(code)) => code,
        Err(_) => ERROR_UNKNOWN,
    }
}

fn load() -> Result<Facts, String> {
    let path = std::env::var_os(ENV_JSON).ok_or_else(|| format!("{ENV_JSON} is not set"))?;
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("{}: {e}", std::path::Path::new(&path).display()))?;
    model::parse(&text).map_err(|e| format!("{}: {e}", std::path::Path::new(&path).display()))
}

pub(crate) fn init() -> NvmlReturn {
    driver::on_init();
    guard(|| {
        let loaded = load();
        let mut st = state();
        // Every init answers from the file as it is now; a failed one leaves nothing behind.
        let refs = std::mem::take(&mut st.refs);
        st.facts = None;
        let facts = loaded.map_err(|why| {
            eprintln!("fake-nvml: {why}");
            ERROR_UNKNOWN
        })?;
        if let Some(err) = &facts.init_error {
            return Err(nonzero(code_for_kind(&err.kind)));
        }
        st.refs = refs.saturating_add(1);
        st.facts = Some(facts);
        Ok(())
    })
}

/// An error kind that names success cannot be an error: answer UNKNOWN.
pub(crate) fn nonzero(code: NvmlReturn) -> NvmlReturn {
    if code == SUCCESS { ERROR_UNKNOWN } else { code }
}

pub(crate) fn with_facts(body: impl FnOnce(&Facts) -> Answer) -> Answer {
    let st = state();
    let facts = st.facts.as_ref().ok_or(ERROR_UNINITIALIZED)?;
    body(facts)
}

/// The device at NVML index `index`, if the count covers it.
pub(crate) fn device_at(facts: &Facts, index: u32) -> Option<&Device> {
    if index >= facts.device_count {
        return None;
    }
    facts.devices.iter().find(|d| d.index == index)
}

/// MIG device handles start here, far above any GPU handle (`index + 1`).
pub(crate) const MIG_HANDLE_BASE: usize = 1 << 24;

/// What `nvmlDeviceGetMaxMigDeviceCount` answers for a recorded list: A100 and H100 hold at
/// most 7 MIG devices.
pub(crate) const MAX_MIG_DEVICES: u32 = 7;

pub(crate) fn mig_handle(gpu: u32, mig: u32) -> Option<Handle> {
    let mig = usize::try_from(mig).ok().filter(|m| *m < 256)?;
    let addr = (gpu as usize)
        .checked_mul(256)?
        .checked_add(MIG_HANDLE_BASE)?
        .checked_add(mig)?;
    Some(std::ptr::without_provenance_mut(addr))
}

/// A MIG handle's (GPU index, MIG index); `None` for a GPU handle.
pub(crate) fn mig_parts(handle: Handle) -> Option<(u32, u32)> {
    let rel = handle.addr().checked_sub(MIG_HANDLE_BASE)?;
    Some((u32::try_from(rel >> 8).ok()?, (rel & 0xff) as u32))
}

pub(crate) fn with_device(handle: Handle, body: impl FnOnce(&Device) -> Answer) -> Answer {
    let index = handle
        .addr()
        .checked_sub(1)
        .and_then(|i| u32::try_from(i).ok());
    if mig_parts(handle).is_none()
        && let Some(index) = index
    {
        driver::on_device_call(index);
    }
    with_facts(|facts| {
        if mig_parts(handle).is_some() {
            return Err(ERROR_INVALID_ARGUMENT);
        }
        let index = index.ok_or(ERROR_INVALID_ARGUMENT)?;
        let device = device_at(facts, index)
            .filter(|d| d.error.is_none())
            .ok_or(ERROR_INVALID_ARGUMENT)?;
        body(device)
    })
}

pub(crate) fn with_mig(handle: Handle, body: impl FnOnce(&MigDevice) -> Answer) -> Answer {
    with_facts(|facts| {
        let (gpu, index) = mig_parts(handle).ok_or(ERROR_INVALID_ARGUMENT)?;
        let mig = device_at(facts, gpu)
            .filter(|d| d.error.is_none())
            .and_then(|d| match &d.mig_devices {
                Reading::Value(list) => list.iter().find(|m| m.index == index && m.error.is_none()),
                _ => None,
            })
            .ok_or(ERROR_INVALID_ARGUMENT)?;
        body(mig)
    })
}

pub(crate) fn with_link(
    handle: Handle,
    link: c_uint,
    body: impl FnOnce(&NvLink) -> Answer,
) -> Answer {
    with_device(handle, |device| match &device.nvlinks {
        Reading::Value(links) => {
            let found = links.iter().find(|l| l.link == link);
            body(found.ok_or(ERROR_INVALID_ARGUMENT)?)
        }
        Reading::NotSupported => Err(ERROR_NOT_SUPPORTED),
        Reading::Error(e) => Err(nonzero(code_for_kind(e.kind()))),
    })
}

pub(crate) fn read<T: Clone>(reading: &Reading<T>) -> Result<T, NvmlReturn> {
    match reading {
        Reading::Value(v) => Ok(v.clone()),
        Reading::NotSupported => Err(ERROR_NOT_SUPPORTED),
        Reading::Error(e) => Err(nonzero(code_for_kind(e.kind()))),
    }
}

pub(crate) fn present<T>(value: Option<T>) -> Result<T, NvmlReturn> {
    value.ok_or(ERROR_NOT_SUPPORTED)
}

pub(crate) fn enable_state(on: bool) -> c_uint {
    if on {
        FEATURE_ENABLED
    } else {
        FEATURE_DISABLED
    }
}
