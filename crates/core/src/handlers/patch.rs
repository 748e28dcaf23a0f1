//! The `apply_patch` tool: where each path is reached (beneath a writable root, or
//! along the resolved path a person approved), the approval, and the writes.

use super::*;

#[derive(Debug, Deserialize)]
pub(super) struct ApplyPatchArgs {
    pub(super) input: String,
}

pub(super) const PATCH_IN_PLAN_MODE: &str = "apply_patch is not available in Plan mode: this turn only explores and proposes a plan; no file was changed. Put the change in your <proposed_plan> instead";
pub(super) const PATCH_IN_REVIEW: &str = "apply_patch is not available in a review: this turn only reviews the changes; no file was changed. Put the fix you suggest in your review instead";
pub(super) const DECLINED_PATCH: &str =
    "this patch was declined (by the user or the approval policy); the files were not changed";
pub(super) async fn handle_patch(
    sess: &Arc<Session>,
    sub_id: &str,
    call_id: &str,
    patch_text: &str,
    cancel: &CancellationToken,
) -> ToolOutcome {
    if sess.is_read_only_turn() {
        // Offered in every turn (the tool list stays the same for the prompt cache); in a
        // read-only turn the call changes nothing and the model is told why.
        let refusal = if sess.is_review_turn() {
            PATCH_IN_REVIEW
        } else {
            PATCH_IN_PLAN_MODE
        };
        report_refused_patch(sess, sub_id, call_id, FileChanges::new(), refusal).await;
        return ToolOutcome::Output(refusal.to_string());
    }
    let cwd = sess.config.cwd.clone();
    // A patch that does not parse or fit its files is still an edit the model tried:
    // front ends show it failed, with why.
    let patch = match apply_patch::parse_patch(patch_text) {
        Ok(patch) => patch,
        Err(err) => {
            let text = format!("apply_patch failed: {err}");
            report_refused_patch(sess, sub_id, call_id, FileChanges::new(), &text).await;
            return ToolOutcome::Output(text);
        }
    };
    // Every path the patch touches is resolved and checked once, before any file is
    // read; what is shown, asked about and written is that resolved target, reached by
    // descriptor (see `interpreter_tools::beneath`).
    let scope = sess.write_scope();
    let targets = match patch_targets(&scope, &cwd, &patch) {
        Ok(targets) => targets,
        Err(text) => {
            report_refused_patch(sess, sub_id, call_id, FileChanges::new(), &text).await;
            return ToolOutcome::Output(text);
        }
    };
    let resolved: Vec<PathBuf> = targets.values().map(|t| t.resolved.clone()).collect();
    let unwritable = unwritable_reason(sess, &scope, &targets);
    let all_writable = unwritable.is_none();
    let session_key = format!(
        "patch:{}",
        resolved
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
    let approved_for_session = sess.is_approved_for_session(&session_key).await;
    // Applied by the agent itself, outside any sandbox: under an operator's ceiling a
    // patch writes only where the thread's commands could.
    if let Some(why) = unwritable.as_deref()
        && let Some(ceiling) = leaving_the_sandbox_refused(&sess.config)
    {
        let text = format!("patch rejected: {why}, and {ceiling}");
        report_refused_patch(sess, sub_id, call_id, FileChanges::new(), &text).await;
        return ToolOutcome::Output(text);
    }
    let assessment = approval::assess_patch(
        sess.config.approval_policy,
        unwritable.as_deref(),
        approved_for_session,
    );
    // A patch that would be refused anyway is refused before any file is read: whether
    // its lines match a file it may not touch is not the model's to learn.
    if let PatchAssessment::Reject(reason) = &assessment {
        let text = format!("patch rejected: {reason}");
        report_refused_patch(sess, sub_id, call_id, FileChanges::new(), &text).await;
        return ToolOutcome::Output(text);
    }
    let plan = match plan_patch(sess, &patch, &cwd, &targets).await {
        Ok(plan) => plan,
        Err(err) => {
            let text = format!("apply_patch failed: {err}");
            report_refused_patch(sess, sub_id, call_id, FileChanges::new(), &text).await;
            return ToolOutcome::Output(text);
        }
    };
    let changes = shown_changes(plan.changes(), &targets);

    let auto_approved = match assessment {
        PatchAssessment::Apply => true,
        PatchAssessment::Reject(reason) => {
            let text = format!("patch rejected: {reason}");
            report_refused_patch(sess, sub_id, call_id, changes, &text).await;
            return ToolOutcome::Output(text);
        }
        PatchAssessment::Ask { reason } => {
            let grant_root = (!all_writable).then(|| common_parent(&resolved)).flatten();
            let request = EventMsg::ApplyPatchApprovalRequest(ApplyPatchApprovalRequestEvent {
                call_id: call_id.to_string(),
                turn_id: sub_id.to_string(),
                changes: changes.clone(),
                reason: Some(reason),
                grant_root,
            });
            let decision = wait_for_approval(
                sess,
                sub_id,
                call_id,
                ApprovalSubject::Patch,
                request,
                cancel,
            )
            .await;
            if let Err(stop) = settle(sess, decision, session_key, DECLINED_PATCH).await {
                let shown = match &stop {
                    ToolOutcome::Output(text) | ToolOutcome::Stop(text) => text.clone(),
                };
                report_refused_patch(sess, sub_id, call_id, changes, &shown).await;
                return stop;
            }
            false
        }
    };

    sess.emit(
        sub_id,
        EventMsg::PatchApplyBegin(PatchApplyBeginEvent {
            call_id: call_id.to_string(),
            turn_id: sub_id.to_string(),
            auto_approved,
            changes: changes.clone(),
        }),
    )
    .await;
    let applied = apply_planned(
        sess,
        sub_id,
        call_id,
        &patch,
        &cwd,
        &targets,
        plan,
        !auto_approved,
    )
    .await;
    let (success, stdout, stderr) = match &applied {
        Ok(plan) => (true, plan.report().summary(), String::new()),
        Err(err) => (false, String::new(), format!("apply_patch failed: {err}")),
    };
    sess.emit(
        sub_id,
        EventMsg::PatchApplyEnd(PatchApplyEndEvent {
            call_id: call_id.to_string(),
            turn_id: sub_id.to_string(),
            stdout: stdout.clone(),
            stderr: stderr.clone(),
            success,
            changes,
        }),
    )
    .await;
    if let Ok(plan) = &applied {
        let unified_diff = sess.record_turn_diff(sub_id, plan).await;
        sess.emit(sub_id, EventMsg::TurnDiff(TurnDiffEvent { unified_diff }))
            .await;
    }
    ToolOutcome::Output(if success { stdout } else { stderr })
}

/// Each path `patch` touches, by the absolute path the patch names, as the target it is
/// read and written through: a path the sandbox lets commands write is reached beneath
/// its root; any other (written only if a person approves, naming the resolved target)
/// along its resolved path. Refused before anything is read: a path that cannot be
/// resolved, and one in the agent's home or a credential agent, which commands can
/// neither read nor write (reading it for the patch would tell the model whether its
/// lines match).
pub(super) fn patch_targets(
    scope: &sandbox::WriteScope,
    cwd: &Path,
    patch: &apply_patch::Patch,
) -> Result<BTreeMap<PathBuf, Target>, String> {
    let mut targets = BTreeMap::new();
    for path in patch.affected_paths(cwd) {
        let Some(resolved) = sandbox::resolve_for_write(&path) else {
            return Err(format!(
                "apply_patch failed: {} cannot be resolved (a symlink loop)",
                path.display()
            ));
        };
        if scope.is_hidden(&resolved) {
            return Err(format!(
                "patch rejected: {} is protected (the agent's home or a credential store); apply_patch never reads or writes it",
                path.display()
            ));
        }
        let purpose = if scope.allows_resolved(&resolved) {
            sandbox::Purpose::Write
        } else {
            sandbox::Purpose::ApprovedWrite
        };
        // The same resolution that was checked, never the name resolved again.
        let target = scope
            .target_resolved(path.clone(), resolved, purpose)
            .ok_or_else(|| format!("apply_patch failed: {} may not be written", path.display()))?;
        targets.insert(path, target);
    }
    Ok(targets)
}

/// The patch's changes by the resolved target each path leads to: what approvals and
/// events name, so a symlink in the workspace cannot show one file and write another.
pub(super) fn shown_changes(
    changes: FileChanges,
    targets: &BTreeMap<PathBuf, Target>,
) -> FileChanges {
    let shown = |path: &PathBuf| {
        targets
            .get(path)
            .map_or_else(|| path.clone(), |target| target.resolved.clone())
    };
    changes
        .into_iter()
        .map(|(path, change)| {
            let change = match change {
                FileChange::Update {
                    unified_diff,
                    move_path,
                } => FileChange::Update {
                    unified_diff,
                    move_path: move_path.as_ref().map(shown),
                },
                other => other,
            };
            (shown(&path), change)
        })
        .collect()
}

/// The patch resolved against its files as the thread's [`WorkspaceFiles`] has them
/// (an editor's unsaved buffers, over ACP), read through `targets`.
pub(super) async fn plan_patch(
    sess: &Session,
    patch: &apply_patch::Patch,
    cwd: &Path,
    targets: &BTreeMap<PathBuf, Target>,
) -> Result<apply_patch::PatchPlan, apply_patch::PatchError> {
    let sources: Vec<Target> = patch
        .sources(cwd)
        .iter()
        .filter_map(|path| targets.get(path).cloned())
        .collect();
    let sources = read_sources(sess.files.as_ref(), sess.thread_id, &sources).await;
    patch.plan(cwd, &sources)
}

/// Make the patch's edits, and record what each file held before and after (what a
/// revert of the turn may undo). `waited`: a person was asked, so the files are read
/// again; when they changed while the question was open, the patch no longer is what the
/// person approved, so nothing is written. Returns the plan that was written.
#[allow(clippy::too_many_arguments)]
pub(super) async fn apply_planned(
    sess: &Session,
    sub_id: &str,
    call_id: &str,
    patch: &apply_patch::Patch,
    cwd: &Path,
    targets: &BTreeMap<PathBuf, Target>,
    planned: apply_patch::PatchPlan,
    waited: bool,
) -> Result<apply_patch::PatchPlan, apply_patch::PatchError> {
    let plan = if waited {
        let now = plan_patch(sess, patch, cwd, targets).await?;
        if now.changes() != planned.changes() {
            return Err(apply_patch::PatchError::Mismatch {
                path: cwd.to_path_buf(),
                message: "the files changed while the patch waited for approval; nothing was written. Read them again and make a new patch.".to_string(),
            });
        }
        now
    } else {
        planned
    };
    let mut record = EditRecorder::new(sub_id, call_id);
    let written = write_edits(sess, &plan, targets, &mut record).await;
    // Also after a failed edit: the ones before it did change the files.
    if let Some(item) = record.finish() {
        sess.persist(&[item]).await;
    }
    written.map(|()| plan)
}

pub(super) async fn write_edits(
    sess: &Session,
    plan: &apply_patch::PatchPlan,
    targets: &BTreeMap<PathBuf, Target>,
    record: &mut EditRecorder,
) -> Result<(), apply_patch::PatchError> {
    for edit in plan.edits() {
        let Some(target) = targets.get(&edit.absolute) else {
            return Err(edit.failed(std::io::Error::other(
                "it was not among the paths checked for the patch",
            )));
        };
        let before = sess.files.read_text(sess.thread_id, target).await;
        match &edit.action {
            apply_patch::EditAction::Write(contents) => {
                sess.files
                    .write_text(sess.thread_id, target, contents)
                    .await
                    .map_err(|source| edit.failed(source))?;
                record.push(
                    &edit.absolute,
                    target.resolved.clone(),
                    before,
                    Some(contents),
                );
            }
            // Removing is always local: the editor protocols have no delete.
            apply_patch::EditAction::Delete | apply_patch::EditAction::RemoveMoved => {
                let local = edit.clone();
                let local_target = target.clone();
                tokio::task::spawn_blocking(move || local.apply_to(&local_target))
                    .await
                    .map_err(|e| edit.failed(std::io::Error::other(e.to_string())))??;
                record.push(&edit.absolute, target.resolved.clone(), before, None);
            }
        }
    }
    Ok(())
}

/// Why the patch may not write where it wants, in the words the model and the user see;
/// `None` when every target is writable in the sandbox.
pub(super) fn unwritable_reason(
    sess: &Session,
    scope: &sandbox::WriteScope,
    targets: &BTreeMap<PathBuf, Target>,
) -> Option<String> {
    let first = targets
        .values()
        .find(|target| !scope.allows_resolved(&target.resolved))?;
    let shown = if first.resolved == first.path {
        first.path.display().to_string()
    } else {
        format!(
            "{} (which leads to {})",
            first.path.display(),
            first.resolved.display()
        )
    };
    Some(
        if sess.turn_sandbox_policy().mode() == SandboxMode::ReadOnly {
            "the sandbox is read-only (sandbox_mode = read-only), so no file may be written; use workspace-write to let the agent edit the workspace".to_string()
        } else if scope
            .roots()
            .iter()
            .any(|root| first.resolved.starts_with(&root.root))
        {
            format!(
                "{shown} is protected (it stays read-only inside the sandbox even under a writable root)"
            )
        } else {
            format!("{shown} lies outside the sandbox's writable roots")
        },
    )
}

/// A patch that will not be applied still shows in every front end (a begin and a failed
/// end with the reason), instead of vanishing.
pub(super) async fn report_refused_patch(
    sess: &Session,
    sub_id: &str,
    call_id: &str,
    changes: FileChanges,
    reason: &str,
) {
    sess.emit(
        sub_id,
        EventMsg::PatchApplyBegin(PatchApplyBeginEvent {
            call_id: call_id.to_string(),
            turn_id: sub_id.to_string(),
            auto_approved: false,
            changes: changes.clone(),
        }),
    )
    .await;
    sess.emit(
        sub_id,
        EventMsg::PatchApplyEnd(PatchApplyEndEvent {
            call_id: call_id.to_string(),
            turn_id: sub_id.to_string(),
            stdout: String::new(),
            stderr: reason.to_string(),
            success: false,
            changes,
        }),
    )
    .await;
}

pub(super) fn common_parent(paths: &[PathBuf]) -> Option<PathBuf> {
    let mut iter = paths.iter().filter_map(|p| p.parent());
    let mut common = iter.next()?.to_path_buf();
    for parent in iter {
        while !parent.starts_with(&common) {
            common = common.parent()?.to_path_buf();
        }
    }
    Some(common)
}
