//! Walks the layers in order, runs every check of a layer, and stops after the first layer that
//! fails (later layers `not_run`, "blocked by <layer>") unless `keep_going`. A check that panics
//! becomes an `error` result: one bad parser must not take the whole diagnosis down.

use std::panic::{self, AssertUnwindSafe};
use std::time::Instant;

use crate::checks::causes::When;
use crate::checks::{self, CheckDef, Context, Outcome};
use crate::facts::node;
use crate::report::{
    CheckResult, Evidence, FigureName, FirstFailure, Layer, LayerReport, NodeInfo, Report,
    SCHEMA_VERSION, SourceInfo, Status, exit,
};
use crate::source::Source;
use crate::text::wording;

/// What to run and how to judge the whole.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Run every layer even after one failed.
    pub keep_going: bool,
    /// Only these layers (empty = all).
    pub only: Vec<Layer>,
    /// Not these layers.
    pub skip: Vec<Layer>,
    /// Warnings make the exit code 1.
    pub strict: bool,
    /// `--profile`: judge against this profile instead of the one chosen from the GPUs.
    pub profile: Option<crate::profile::Profile>,
    /// `--pod-interface`: inside a Pod, the secondary interfaces to judge (default net1, net2, ...).
    pub pod_interfaces: Vec<String>,
    /// `--sample SECS` on a live node: the first counter reading; the checks' own reading is
    /// the second (a capture's window comes from its source instead).
    pub sample: Option<crate::answers::baseline::Baseline>,
}

impl RunOptions {
    fn deselected(&self, layer: Layer) -> Option<&'static str> {
        if self.skip.contains(&layer) {
            Some("skipped by --skip")
        } else if !self.only.is_empty() && !self.only.contains(&layer) {
            Some("not selected by --only")
        } else {
            None
        }
    }
}

/// The context a run with `options` judges in: the forced profile and Pod interfaces set.
pub fn context<'a>(source: &'a dyn Source, options: &RunOptions) -> Context<'a> {
    Context::new(source)
        .with_profile(options.profile.clone())
        .with_pod_interfaces(options.pod_interfaces.clone())
        .with_sample(options.sample.clone())
}

/// Run the checks of `registry` against `source`.
pub fn run_with(source: &dyn Source, registry: &[CheckDef], options: &RunOptions) -> Report {
    run_in(&context(source, options), registry, options)
}

/// Run the checks of `registry` in `ctx` (made by [`context`]), which keeps the facts they
/// read for the caller (`snapshot::take`, for `diff` and `check --with-facts`).
pub fn run_in(ctx: &Context<'_>, registry: &[CheckDef], options: &RunOptions) -> Report {
    let started = Instant::now();
    let source = ctx.source();
    let mut layers = Vec::new();
    let mut blocked_by: Option<Layer> = None;

    for layer in Layer::ALL {
        let layer_checks: Vec<&CheckDef> = registry.iter().filter(|c| c.layer == layer).collect();
        let mut report = LayerReport {
            id: layer,
            title: layer.title().to_string(),
            status: Status::Skip,
            reason: None,
            duration_ms: 0,
            checks: Vec::new(),
        };
        if let Some(blocker) = blocked_by {
            report.status = Status::NotRun;
            report.reason = Some(format!("blocked by {blocker}"));
        } else if let Some(why) = options.deselected(layer) {
            report.reason = Some(why.to_string());
        } else if layer_checks.is_empty() {
            report.reason = Some("not implemented yet".to_string());
        } else {
            let layer_started = Instant::now();
            let (checks, log_only): (Vec<CheckResult>, Vec<bool>) =
                layer_checks.iter().map(|def| run_check(def, ctx)).unzip();
            report.checks = checks;
            report.duration_ms = layer_started.elapsed().as_millis() as u64;
            report.status = summarize(&report.checks);
            if report.status == Status::Skip {
                report.reason = Some(skip_reason(&report.checks));
            } else if let Some(reason) = nothing_but_quiet_logs(&report.checks, &log_only) {
                report.status = Status::Skip;
                report.reason = Some(reason);
            }
            if report.status == Status::Fail && !options.keep_going {
                blocked_by = Some(layer);
            }
        }
        layers.push(report);
    }

    let identity = node::gather(source);
    let driver_version = match ctx.module_version() {
        Ok(Some((v, _))) => Some(v.clone()),
        _ => None,
    };
    attribute_causes(&mut layers);
    let first_failure = first_failure(&layers);
    let exit_code = exit_code(&layers, options.strict);
    Report {
        schema_version: SCHEMA_VERSION,
        gpudoctor_version: env!("CARGO_PKG_VERSION").to_string(),
        source: SourceInfo {
            kind: source.kind(),
            root: source.root().display().to_string(),
            captured_at: source.captured_at(),
        },
        node: NodeInfo {
            hostname: identity.hostname,
            pod: identity.pod,
            kernel: identity.kernel,
            driver_version,
            gpus: gpu_identities(ctx),
        },
        profile: if layers.iter().any(|l| !l.checks.is_empty()) {
            ctx.profile().map(|p| p.name.clone())
        } else {
            None
        },
        generated_at: Some(crate::time::rfc3339(std::time::SystemTime::now())),
        layers,
        first_failure,
        exit_code,
        duration_ms: started.elapsed().as_millis() as u64,
        facts: None,
    }
}

/// What a report made of layers run elsewhere concludes (`gpudoctor judge` joins one run per
/// pasted file): causes attributed across them, the first failure and the exit code, as
/// [`run_in`] concludes its own walk.
pub fn conclude(layers: &mut [LayerReport], strict: bool) -> (Option<FirstFailure>, i32) {
    attribute_causes(layers);
    (first_failure(layers), exit_code(layers, strict))
}

/// What NVML said of each GPU an RMA form asks for, when it was asked (NVML is read once per run
/// and memoised: a run whose layers never asked NVML does not ask it for this).
fn gpu_identities(ctx: &Context<'_>) -> Vec<crate::report::GpuIdentity> {
    let Some(nvml) = ctx.nvml_if_read() else {
        return Vec::new();
    };
    nvml.devices
        .iter()
        .filter_map(|d| {
            let gpu = crate::report::GpuIdentity {
                pci_bus_id: d.pci_bus_id.clone()?,
                serial: d.serial.value().cloned(),
                board_part_number: d.board_part_number.value().cloned(),
                module_id: d.module_id.value().copied(),
            };
            (gpu.serial.is_some() || gpu.board_part_number.is_some() || gpu.module_id.is_some())
                .then_some(gpu)
        })
        .collect()
}

/// Marks every finding a warned or failed cause explains ([`checks::causes`]) `explained_by`
/// the root of its chain: nouveau explains the missing `nvidia` module, which explains NVML's
/// failure, so NVML's failure is explained by nouveau. A chain that loops is left unexplained.
fn attribute_causes(layers: &mut [LayerReport]) {
    let results: Vec<(Layer, &CheckResult)> = layers
        .iter()
        .flat_map(|l| l.checks.iter().map(move |c| (l.id, c)))
        .collect();
    let finding = |code: &str| {
        results
            .iter()
            .find(|(_, c)| c.code == code && matches!(c.status, Status::Warn | Status::Fail))
            .map(|(_, c)| *c)
    };
    // The direct cause of each finding: the first declared cause that warned or failed, and
    // whose condition holds for this finding.
    let direct: Vec<Option<&'static str>> = results
        .iter()
        .map(|(layer, check)| {
            if !check.status.is_finding() {
                return None;
            }
            checks::causes::CAUSES
                .iter()
                .find(|cause| {
                    cause.explains(&check.code, *layer)
                        && finding(cause.cause).is_some_and(|c| holds(cause.when, c, check))
                })
                .map(|cause| cause.cause)
        })
        .collect();
    let results: Vec<(Layer, &str, Status)> = results
        .iter()
        .map(|(layer, c)| (*layer, c.code.as_str(), c.status))
        .collect();
    let direct_of = |code: &str| {
        results
            .iter()
            .position(|(_, c, _)| *c == code)
            .and_then(|i| direct[i])
    };
    let roots: Vec<Option<String>> = direct
        .iter()
        .zip(&results)
        .map(|(first, (_, code, _))| {
            let mut root = (*first)?;
            let mut seen = vec![*code, root];
            while let Some(next) = direct_of(root) {
                if seen.contains(&next) {
                    return None;
                }
                seen.push(next);
                root = next;
            }
            Some(root.to_string())
        })
        .collect();
    let mut roots = roots.into_iter();
    for check in layers.iter_mut().flat_map(|l| l.checks.iter_mut()) {
        check.explained_by = roots.next().flatten();
    }
}

/// Does `cause`'s finding explain `finding` under `when`? For [`When::SameGpuXid`]: the finding
/// names its GPUs, and each has one of the XIDs live (the cause's `xid_events` figures of state
/// `live`: nothing since brought the GPU back).
fn holds(when: When, cause: &CheckResult, finding: &CheckResult) -> bool {
    match when {
        When::Always => true,
        When::Declared => finding.follows_from.as_deref() == Some(cause.code.as_str()),
        When::SameGpuXid(xids) => {
            let bus = |b: &str| crate::answers::nvml::normalize_bus_id(b).unwrap_or(b.to_string());
            let logged: Vec<String> = cause
                .figures
                .iter()
                .filter(|f| f.name == FigureName::XidEvents && f.value > 0.0)
                .filter(|f| f.labels.get("state").is_some_and(|s| s == "live"))
                .filter(|f| {
                    f.labels
                        .get("xid")
                        .and_then(|x| x.parse::<u32>().ok())
                        .is_some_and(|x| xids.contains(&x))
                })
                .filter_map(|f| f.labels.get("gpu").map(|g| bus(g)))
                .collect();
            !finding.gpus.is_empty() && finding.gpus.iter().all(|g| logged.contains(&bus(g)))
        }
    }
}

/// The cause of the first failure: the first failed check of the first failed layer, or the
/// finding that explains it (`explained_by`), which may sit in another layer or only warn (no
/// GPUDirect RDMA explains a bus bandwidth below the floor).
fn first_failure(layers: &[LayerReport]) -> Option<FirstFailure> {
    let failed = layers
        .iter()
        .find(|l| l.status == Status::Fail)
        .and_then(|l| l.checks.iter().find(|c| c.status == Status::Fail))?;
    let cause_code = failed.explained_by.as_deref().unwrap_or(&failed.code);
    let (layer, cause) = layers
        .iter()
        .flat_map(|l| l.checks.iter().map(move |c| (l.id, c)))
        .find(|(_, c)| c.code == cause_code && c.status.is_finding())?;
    Some(FirstFailure {
        layer,
        code: cause.code.clone(),
        summary: cause.summary.clone(),
        hint: cause.hint.clone(),
        action: Some(cause.action),
    })
}

/// Run every registered check.
pub fn run(source: &dyn Source, options: &RunOptions) -> Report {
    run_with(source, &checks::registry(), options)
}

/// A layer that passed only on kernel-log checks that found nothing, every other check
/// skipping, has nothing to judge on this node: it is `skip`, and the reason says why the
/// others skipped and that the kernel log was read and quiet (README: a layer that does not
/// apply is skip). `None` for any other layer.
fn nothing_but_quiet_logs(checks: &[CheckResult], log_only: &[bool]) -> Option<String> {
    let quiet = |(c, l): (&CheckResult, &bool)| c.status == Status::Pass && *l;
    let judged: Vec<&CheckResult> = checks.iter().filter(|c| c.status != Status::Skip).collect();
    let skipped: Vec<CheckResult> = checks
        .iter()
        .filter(|c| c.status == Status::Skip)
        .cloned()
        .collect();
    let all_quiet = checks
        .iter()
        .zip(log_only)
        .filter(|(c, _)| c.status != Status::Skip)
        .all(quiet);
    (!judged.is_empty() && !skipped.is_empty() && all_quiet).then(|| {
        format!(
            "{}; nothing else to judge: {} kernel-log check(s) found nothing",
            skip_reason(&skipped),
            judged.len()
        )
    })
}

fn run_check(def: &CheckDef, ctx: &Context<'_>) -> (CheckResult, bool) {
    let outcome =
        panic::catch_unwind(AssertUnwindSafe(|| (def.run)(ctx))).unwrap_or_else(|payload| {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Outcome::error(format!("check crashed: {message}")).hint(
                "this is a gpudoctor bug: please report it with `gpudoctor record` output attached",
            )
        });
    let log_only = outcome.log_only && outcome.status == Status::Pass;
    let result = CheckResult {
        code: def.code.to_string(),
        title: def.title.to_string(),
        status: outcome.status,
        summary: proper(outcome.summary),
        evidence: outcome.evidence.into_iter().map(proper_evidence).collect(),
        hint: outcome.hint.map(proper),
        action: outcome.action,
        figures: outcome.figures,
        gpus: outcome
            .ties
            .as_ref()
            .map(|t| t.gpus.clone())
            .unwrap_or_default(),
        explained_by: None,
        follows_from: outcome
            .ties
            .and_then(|t| t.follows_from)
            .map(|c| c.cause.to_string()),
    };
    (result, log_only)
}

/// Acronyms and units as people write them (`text::wording`) in what a check wrote.
fn proper(text: String) -> String {
    match wording::proper(&text) {
        std::borrow::Cow::Borrowed(_) => text,
        std::borrow::Cow::Owned(better) => better,
    }
}

/// [`proper`] for what the check expected, and for what it observed unless that is a line
/// quoted from the node (`Evidence::quoted`: a kernel log line keeps its bytes).
fn proper_evidence(mut e: Evidence) -> Evidence {
    e.expected = e.expected.map(proper);
    if !e.quoted {
        e.observed = proper(e.observed);
    }
    e
}

/// Why a layer whose checks all skipped was skipped: their distinct reasons in check order
/// ("no sr-iov capable functions and no vf resources; not running inside a pod"), so an
/// operator reads what would make the layer apply. Without stated reasons, or with more than
/// three different ones, the generic "does not apply to this node".
fn skip_reason(checks: &[CheckResult]) -> String {
    const MOST: usize = 3;
    // The active probes' checks run only when asked (`--cuda`, `--bandwidth`): "not requested"
    // says nothing about whether the layer applies to this node, so another check's reason
    // stands alone.
    let said = |c: &&CheckResult| !c.summary.trim().is_empty();
    let passive: Vec<&CheckResult> = checks
        .iter()
        .filter(|c| !crate::checks::active::is_active(&c.code))
        .collect();
    let chosen: Vec<&CheckResult> = if passive.iter().any(said) {
        passive
    } else {
        checks.iter().collect()
    };
    let mut reasons: Vec<&str> = Vec::new();
    for summary in chosen.iter().map(|c| c.summary.trim()) {
        // One reason said twice, once with more detail (two AER checks), is said once, whole.
        if summary.is_empty() || reasons.iter().any(|r| r.contains(summary)) {
            continue;
        }
        reasons.retain(|r| !summary.contains(r));
        reasons.push(summary);
    }
    if reasons.is_empty() || reasons.len() > MOST {
        return "does not apply to this node".to_string();
    }
    reasons.join("; ")
}

/// A layer is as bad as its worst check; all-skip is skip.
pub fn summarize(checks: &[CheckResult]) -> Status {
    checks
        .iter()
        .map(|c| c.status)
        .max_by_key(|s| s.severity())
        .unwrap_or(Status::Skip)
}

/// 1 when a layer failed (or warned under --strict), 3 when something could not be evaluated
/// and nothing failed or when no layer ran a check at all (every layer deselected: nothing was
/// judged, so nothing may be called healthy), else 0.
pub fn exit_code(layers: &[LayerReport], strict: bool) -> i32 {
    let statuses = || layers.iter().map(|l| l.status);
    if statuses().any(|s| s == Status::Fail) || (strict && statuses().any(|s| s == Status::Warn)) {
        exit::FAILED
    } else if statuses().any(|s| s == Status::Error) || layers.iter().all(|l| l.checks.is_empty()) {
        exit::INCONCLUSIVE
    } else {
        exit::HEALTHY
    }
}

#[cfg(test)]
mod nccl_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::Explain;
    use crate::source::ReplaySource;

    const EXPLAIN: Explain = Explain {
        reads: "r",
        expects: "e",
        why: "w",
        fix: "f",
    };

    #[test]
    fn a_skipped_layer_says_each_distinct_reason() {
        let skipped = |summary: &str| CheckResult {
            code: "x.y".into(),
            title: "t".into(),
            status: Status::Skip,
            summary: summary.into(),
            evidence: Vec::new(),
            hint: None,
            action: crate::report::Action::None,
            figures: Default::default(),
            gpus: Vec::new(),
            explained_by: None,
            follows_from: None,
        };
        let a = "no sr-iov capable functions";
        let b = "not running inside a pod";
        assert_eq!(skip_reason(&[skipped(a)]), a);
        assert_eq!(
            skip_reason(&[skipped(a), skipped(b), skipped(a)]),
            format!("{a}; {b}")
        );
        // The same reason with more detail (two AER checks) is said once, with the detail.
        let more = format!("{a} (1 report about other devices)");
        assert_eq!(skip_reason(&[skipped(a), skipped(&more)]), more);
        assert_eq!(
            skip_reason(&[skipped(&more), skipped(a), skipped(b)]),
            format!("{more}; {b}")
        );
        let generic = "does not apply to this node";
        assert_eq!(skip_reason(&[skipped(""), skipped(" ")]), generic);
        let many: Vec<CheckResult> = ["a", "b", "c", "d"].map(skipped).into();
        assert_eq!(skip_reason(&many), generic);
        // An active probe not asked for leaves the reason to the layer's other checks.
        let probe = CheckResult {
            code: "nvlink.p2p_bandwidth".into(),
            ..skipped("bandwidth not requested")
        };
        assert_eq!(skip_reason(&[skipped(a), probe.clone()]), a);
        assert_eq!(skip_reason(&[probe]), "bandwidth not requested");
    }

    fn def(code: &'static str, layer: Layer, run: fn(&Context<'_>) -> Outcome) -> CheckDef {
        CheckDef {
            code,
            layer,
            title: "t",
            explain: EXPLAIN,
            run,
        }
    }

    fn source() -> (tempfile::TempDir, ReplaySource) {
        let dir = tempfile::tempdir().unwrap();
        let src = ReplaySource::new(dir.path());
        (dir, src)
    }

    #[test]
    fn stops_after_first_failed_layer_unless_keep_going() {
        let (_d, src) = source();
        let registry = [
            def("driver.a", Layer::Driver, |_| Outcome::pass("ok")),
            def("toolkit.b", Layer::Toolkit, |_| Outcome::fail("broken")),
            def("topology.c", Layer::Topology, |_| Outcome::warn("meh")),
        ];
        let report = run_with(&src, &registry, &RunOptions::default());
        assert_eq!(report.exit_code, 1);
        assert_eq!(report.first_failure.as_ref().unwrap().code, "toolkit.b");
        assert_eq!(
            report.layer(Layer::DevicePlugin).unwrap().status,
            Status::NotRun
        );
        assert_eq!(
            report.layer(Layer::Topology).unwrap().reason.as_deref(),
            Some("blocked by toolkit")
        );

        let all = run_with(
            &src,
            &registry,
            &RunOptions {
                keep_going: true,
                ..Default::default()
            },
        );
        assert_eq!(all.layer(Layer::Topology).unwrap().status, Status::Warn);
        assert_eq!(
            all.layer(Layer::DevicePlugin).unwrap().reason.as_deref(),
            Some("not implemented yet")
        );
    }

    /// The cause `code`'s result names, in the first layer.
    fn explained_by(report: &Report, code: &str) -> Option<String> {
        report.layers[0]
            .checks
            .iter()
            .find(|c| c.code == code)
            .unwrap_or_else(|| panic!("{code} ran"))
            .explained_by
            .clone()
    }

    #[test]
    fn an_xid_explains_only_findings_on_the_gpus_that_logged_it() {
        use crate::report::Figure;
        let (_d, src) = source();
        let registry = [
            def("driver.gpu_count", Layer::Driver, |_| {
                // XID 79 on this GPU is history (it was brought back since): not why it is lost.
                Outcome::fail("gpu c lost").about_gpus(["0000:cc:00.0"])
            }),
            def("driver.xid_events", Layer::Driver, |_| {
                Outcome::fail("xid 48 on a").figures([
                    Figure::new(FigureName::XidEvents, 1.0)
                        .label("gpu", "0000:aa:00.0")
                        .label("xid", "48")
                        .label("severity", "fatal")
                        .label("state", "live"),
                    Figure::new(FigureName::XidEvents, 1.0)
                        .label("gpu", "0000:cc:00.0")
                        .label("xid", "79")
                        .label("severity", "fatal")
                        .label("state", "history"),
                ])
            }),
            // NVML writes the domain in eight digits, capitals: the same GPU.
            def("driver.ecc_errors", Layer::Driver, |_| {
                Outcome::fail("dbe on a").about_gpus(["00000000:AA:00.0"])
            }),
            def("driver.row_remap", Layer::Driver, |_| {
                Outcome::fail("remaps on a and b").about_gpus(["0000:aa:00.0", "0000:bb:00.0"])
            }),
            def("driver.retired_pages", Layer::Driver, |_| {
                Outcome::fail("no gpu named")
            }),
        ];
        let report = run_with(&src, &registry, &RunOptions::default());
        let by = |code: &str| explained_by(&report, code);
        assert_eq!(
            by("driver.ecc_errors").as_deref(),
            Some("driver.xid_events")
        );
        assert_eq!(by("driver.row_remap"), None, "gpu b logged no xid 48");
        assert_eq!(by("driver.gpu_count"), None, "xid 79 of an earlier boot");
        assert_eq!(
            by("driver.retired_pages"),
            None,
            "not a declared consequence"
        );
        assert_eq!(report.first_failure.unwrap().code, "driver.gpu_count");
    }

    #[test]
    fn the_first_failure_is_the_cause_and_its_consequences_point_at_it() {
        let (_d, src) = source();
        // Walk order puts the symptoms first; the declared cause comes third.
        let registry = [
            def("driver.nvidia_module", Layer::Driver, |_| {
                Outcome::fail("no nvidia")
            }),
            def("driver.nvml_init", Layer::Driver, |_| {
                Outcome::fail("no nvml")
            }),
            def("driver.nouveau_absent", Layer::Driver, |_| {
                Outcome::fail("nouveau")
            }),
            def("driver.persistence_mode", Layer::Driver, |_| {
                Outcome::pass("ok")
            }),
        ];
        let report = run_with(&src, &registry, &RunOptions::default());
        let first = report.first_failure.as_ref().unwrap();
        assert_eq!(first.code, "driver.nouveau_absent");
        assert_eq!(first.summary, "nouveau");
        let by = |code: &str| explained_by(&report, code);
        // The chain nouveau -> nvidia module -> nvml resolves to its root.
        assert_eq!(
            by("driver.nvidia_module").as_deref(),
            Some("driver.nouveau_absent")
        );
        assert_eq!(
            by("driver.nvml_init").as_deref(),
            Some("driver.nouveau_absent")
        );
        assert_eq!(by("driver.nouveau_absent"), None);
        assert_eq!(
            by("driver.persistence_mode"),
            None,
            "a pass is nobody's consequence"
        );
        assert_eq!(report.consequences("driver.nouveau_absent").count(), 2);
        assert_eq!(report.exit_code, 1);

        // Without the cause failing, the symptom is the first failure and explained by nothing
        // but the module's absence.
        let registry = [
            def("driver.nvidia_module", Layer::Driver, |_| {
                Outcome::fail("no nvidia")
            }),
            def("driver.nvml_init", Layer::Driver, |_| {
                Outcome::fail("no nvml")
            }),
            def("driver.nouveau_absent", Layer::Driver, |_| {
                Outcome::pass("none")
            }),
        ];
        let report = run_with(&src, &registry, &RunOptions::default());
        assert_eq!(report.first_failure.unwrap().code, "driver.nvidia_module");
        assert_eq!(
            report.layers[0].checks[1].explained_by.as_deref(),
            Some("driver.nvidia_module")
        );

        // A warning can be the cause of a failure (no GPUDirect RDMA, bandwidth below floor).
        let registry = [
            def("nccl.gpudirect_rdma", Layer::Nccl, |_| {
                Outcome::warn("no gdr")
            }),
            def("nccl.bus_bandwidth", Layer::Nccl, |_| Outcome::fail("slow")),
        ];
        let report = run_with(&src, &registry, &RunOptions::default());
        let first = report.first_failure.unwrap();
        assert_eq!(
            (first.layer, first.code.as_str()),
            (Layer::Nccl, "nccl.gpudirect_rdma")
        );
        // Unrelated failures stay their own cause.
        let registry = [def("toolkit.installed", Layer::Toolkit, |_| {
            Outcome::fail("x")
        })];
        let report = run_with(&src, &registry, &RunOptions::default());
        assert!(report.layers[1].checks[0].explained_by.is_none());
    }

    #[test]
    fn a_panicking_check_is_an_error_result() {
        let (_d, src) = source();
        let registry = [def("driver.boom", Layer::Driver, |_| {
            panic!("parser exploded")
        })];
        let report = run_with(&src, &registry, &RunOptions::default());
        let check = &report.layers[0].checks[0];
        assert_eq!(check.status, Status::Error);
        assert!(check.summary.contains("parser exploded"));
        assert_eq!(report.exit_code, 3);
    }

    #[test]
    fn strict_turns_warnings_into_failure_and_selection_skips() {
        let (_d, src) = source();
        let registry = [
            def("driver.a", Layer::Driver, |_| Outcome::warn("meh")),
            def("rdma.b", Layer::Rdma, |_| Outcome::fail("down")),
        ];
        let opts = RunOptions {
            skip: vec![Layer::Rdma],
            ..Default::default()
        };
        let report = run_with(&src, &registry, &opts);
        assert_eq!(report.exit_code, 0);
        assert_eq!(
            report.layer(Layer::Rdma).unwrap().reason.as_deref(),
            Some("skipped by --skip")
        );
        let strict = run_with(
            &src,
            &registry,
            &RunOptions {
                strict: true,
                only: vec![Layer::Driver],
                ..Default::default()
            },
        );
        assert_eq!(strict.exit_code, 1);
        assert_eq!(
            strict.layer(Layer::Rdma).unwrap().reason.as_deref(),
            Some("not selected by --only")
        );
    }

    #[test]
    fn a_run_in_which_no_layer_ran_is_inconclusive() {
        // `--only driver --skip driver`: every layer deselected, no check ran. Before, this was
        // exit 0 and NPD read it as "all layers pass".
        let (_d, src) = source();
        let registry = [def("driver.a", Layer::Driver, |_| Outcome::pass("ok"))];
        let report = run_with(
            &src,
            &registry,
            &RunOptions {
                only: vec![Layer::Driver],
                skip: vec![Layer::Driver],
                ..Default::default()
            },
        );
        assert!(report.nothing_ran());
        assert_eq!(report.exit_code, 3);
        // One layer that ran and passed is a verdict; so is one whose checks all skipped.
        let one = run_with(
            &src,
            &registry,
            &RunOptions {
                only: vec![Layer::Driver],
                ..Default::default()
            },
        );
        assert!(!one.nothing_ran());
        assert_eq!(one.exit_code, 0);
        let skipped = run_with(
            &src,
            &[def("driver.a", Layer::Driver, |_| Outcome::skip("n/a"))],
            &RunOptions::default(),
        );
        assert_eq!(skipped.exit_code, 0);
    }
}
