//! Walks the runner scale set protocol once, with the `scaleset` crate, against the GitHub of `SCALESET_URL`:
//! registers a scale set, opens its message session (and meets the conflict of a second one), waits for the
//! statistics and the messages of a job queued meanwhile, acquires it, generates a runner's JIT config, then
//! removes that runner, closes the session and deletes the scale set. Each step is one JSON line on stdout, so
//! that a test can follow it (and queue the job once the session is open); no credential is printed.
//!
//! Environment: SCALESET_URL (a repository, organization or enterprise URL), SCALESET_NAME, GITHUB_TOKEN, and
//! SCALESET_ALLOW_HTTP=1 for a plain-HTTP server such as the simulator.

use std::env;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use scaleset::{
    Client, Credentials, ExposeSecret, JitRunnerSetting, JobMessage, MessageId, RunnerScaleSetSpec,
    ScaleSetStatistics,
};
use serde_json::json;

/// How long the walk waits for each message it expects.
const WAIT: Duration = Duration::from_secs(60);

fn step(name: &str, detail: serde_json::Value) {
    println!("{}", json!({ "step": name, "detail": detail }));
}

fn statistics(s: &ScaleSetStatistics) -> serde_json::Value {
    json!({
        "available": s.total_available_jobs,
        "acquired": s.total_acquired_jobs,
        "assigned": s.total_assigned_jobs,
        "running": s.total_running_jobs,
        "registered": s.total_registered_runners,
        "busy": s.total_busy_runners,
        "idle": s.total_idle_runners,
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    let url = env::var("SCALESET_URL").context("SCALESET_URL is required")?;
    let name = env::var("SCALESET_NAME").context("SCALESET_NAME is required")?;
    let token = env::var("GITHUB_TOKEN").context("GITHUB_TOKEN is required")?;
    let client = Client::builder(&url, Credentials::personal_access_token(token)?)
        .allow_http(env::var("SCALESET_ALLOW_HTTP").is_ok_and(|v| v == "1"))
        .build()?;

    let group = client
        .get_runner_group_by_name("Default")
        .await?
        .context("no runner group named Default")?;
    step("group", json!({ "id": group.id.get(), "name": group.name }));

    let created = client
        .create_runner_scale_set(
            &RunnerScaleSetSpec::new(&name)
                .runner_group_id(group.id)
                .disable_update(true),
        )
        .await?;
    let found = client
        .get_runner_scale_set_by_name(group.id, &name)
        .await?
        .context("the scale set just created is not found by name")?;
    if found.id != created.id {
        bail!(
            "found scale set {} by name, created {}",
            found.id,
            created.id
        );
    }
    step(
        "scale_set",
        json!({ "id": created.id.get(), "name": created.name, "labels": created.labels.iter().map(|l| &l.name).collect::<Vec<_>>() }),
    );

    let session = client
        .create_message_session(created.id, "scaleset-client")
        .await?;
    let initial = session.info().statistics.unwrap_or_default();
    step("session", json!({ "statistics": statistics(&initial) }));
    match client
        .create_message_session(created.id, "scaleset-client-2")
        .await
    {
        Err(e) if e.is_conflict() => step(
            "second_session",
            json!({ "conflict": true, "error": e.to_string() }),
        ),
        Err(e) => bail!("a second session failed otherwise: {e}"),
        Ok(_) => bail!("a second session was opened while the first lives"),
    }

    // The test queues a job now: its JobAvailable, then, once acquired, its JobAssigned.
    let mut last: Option<MessageId> = None;
    let mut acquired = Vec::new();
    let deadline = Instant::now() + WAIT;
    let mut assigned = false;
    while !assigned {
        if Instant::now() > deadline {
            bail!("no JobAssigned within {WAIT:?}");
        }
        let Some(message) = session.get_message(last, 2).await? else {
            step("empty_poll", json!({}));
            continue;
        };
        let kinds: Vec<&str> = message
            .jobs
            .iter()
            .map(|m| match m {
                JobMessage::Available(_) => "JobAvailable",
                JobMessage::Assigned(_) => "JobAssigned",
                JobMessage::Started(_) => "JobStarted",
                JobMessage::Completed(_) => "JobCompleted",
                _ => "Unknown",
            })
            .collect();
        step(
            "message",
            json!({
                "id": message.id.get(),
                "jobs": kinds,
                "labels": message.jobs.iter().filter_map(|m| m.job()).map(|j| j.request_labels.clone()).collect::<Vec<_>>(),
                "statistics": message.statistics.as_ref().map(statistics),
            }),
        );
        let available: Vec<_> = message
            .jobs_available()
            .map(|j| j.job.runner_request_id)
            .collect();
        assigned = message.jobs_assigned().next().is_some();
        session.delete_message(message.id).await?;
        last = Some(message.id);
        if !available.is_empty() {
            let got = session.acquire_jobs(&available).await?;
            step(
                "acquired",
                json!({ "offered": available.iter().map(|i| i.get()).collect::<Vec<_>>(), "acquired": got.iter().map(|i| i.get()).collect::<Vec<_>>() }),
            );
            acquired.extend(got);
        }
    }

    let jit = client
        .generate_jit_config(
            created.id,
            &JitRunnerSetting::new(format!("{name}-runner-1")),
        )
        .await?;
    let runner = jit.runner.context("the JIT config names no runner")?;
    step(
        "jit_config",
        json!({ "runner_id": runner.id.get(), "runner_name": runner.name, "scale_set_id": runner.runner_scale_set_id.get(), "config_length": jit.encoded_jit_config.expose_secret().len() }),
    );
    match client
        .generate_jit_config(created.id, &JitRunnerSetting::new(&runner.name))
        .await
    {
        Err(e) if e.is_runner_exists() => {
            step("jit_config_again", json!({ "runner_exists": true }))
        }
        other => bail!(
            "a second JIT config for {} was not refused as existing: {other:?}",
            runner.name
        ),
    }
    let listed = client
        .get_runner_by_name(&runner.name)
        .await?
        .context("the runner is not found by name")?;
    client.remove_runner(listed.id).await?;
    match client.get_runner(listed.id).await {
        Err(e) if e.is_runner_not_found() => {
            step("runner_removed", json!({ "id": listed.id.get() }))
        }
        other => bail!(
            "runner {} is still found after its removal: {other:?}",
            listed.id
        ),
    }

    session.close().await?;
    client.delete_runner_scale_set(created.id).await?;
    match client.get_runner_scale_set_by_name(group.id, &name).await? {
        None => step(
            "done",
            json!({ "acquired": acquired.iter().map(|i| i.get()).collect::<Vec<_>>() }),
        ),
        Some(left) => bail!("scale set {} is still there", left.id),
    }
    Ok(())
}
