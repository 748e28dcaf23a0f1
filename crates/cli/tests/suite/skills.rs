//! Agent Skills through the real binary: a repository skill is offered to the model by
//! name, description and path only, and its body reaches the model when a prompt
//! mentions it (`$name` in exec, a `skill` input on the app-server, a slash command over
//! ACP); `skills/list` and `skills/config/write`; and a sandboxed command, or a background
//! loop it leaves racing the census, cannot plant a skill the agent would load later.

use std::path::Path;

use crate::acp_support::AcpEnv;
use crate::app_server_support::AppEnv;
use crate::exec_support::{TestEnv, script_shell, script_text};
use serde_json::{Value, json};

const BODY_MARKER: &str = "Run ./deploy.sh with the target named in the task.";

/// `.agents/skills/deploy/SKILL.md` (and a bad one beside it) in `repo`, a git repository.
fn write_repo_skill(repo: &Path) -> std::path::PathBuf {
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    let dir = repo.join(".agents/skills/deploy");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("SKILL.md");
    std::fs::write(
        &path,
        format!(
            "---\nname: deploy\ndescription: Deploy the service to staging or production.\n---\n# Deploying\n{BODY_MARKER}\n"
        ),
    )
    .unwrap();
    let bad = repo.join(".agents/skills/Broken");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(bad.join("SKILL.md"), "no front matter here\n").unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_skill_is_offered_by_description_and_loaded_when_mentioned() {
    let env = TestEnv::new().await;
    let skill = write_repo_skill(&env.work_path());
    script_text(&env.server, "Listed.");
    let plain = env.run(&["exec", "--json", "what can you do?"]).await;
    plain.assert_success();
    let warned = plain.stdout.clone() + &plain.stderr;
    assert!(
        warned.contains("Broken/SKILL.md left out") && warned.contains("front matter"),
        "the bad skill is reported with its reason: {warned}"
    );
    let first = env.server.requests()[0]["messages"].to_string();
    assert!(
        first.contains("- deploy: Deploy the service to staging or production."),
        "{first}"
    );
    assert!(
        first.contains(&skill.display().to_string()),
        "the path is offered: {first}"
    );
    assert!(
        !first.contains(BODY_MARKER),
        "the body is not disclosed unasked: {first}"
    );

    script_text(&env.server, "Deployed.");
    let mentioned = env
        .run(&["exec", "--json", "use $deploy for staging"])
        .await;
    mentioned.assert_success();
    let second = env.server.requests()[1]["messages"].clone();
    let messages = second.as_array().unwrap();
    let prompt_at = messages
        .iter()
        .position(|m| m.to_string().contains("use $deploy for staging"))
        .expect("the prompt");
    let body_at = messages
        .iter()
        .position(|m| m.to_string().contains(BODY_MARKER))
        .expect("the body follows the mention");
    assert!(body_at > prompt_at, "{second}");
    assert!(
        messages[body_at]
            .to_string()
            .contains("<name>deploy</name>")
    );
    // What the user sees as their message is what they wrote, not the skill body.
    assert!(
        !mentioned.stdout.contains(BODY_MARKER),
        "{}",
        mentioned.stdout
    );
    env.server.assert_invariants();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_list_reports_skills_and_errors_and_config_write_turns_one_off() {
    let env = AppEnv::new().await;
    let work = env.work_path();
    let skill = write_repo_skill(&work);
    let user_skill = env.home.path().join(".agents/skills/notes");
    std::fs::create_dir_all(&user_skill).unwrap();
    std::fs::write(
        user_skill.join("SKILL.md"),
        "---\nname: notes\ndescription: Keep notes.\n---\nbody\n",
    )
    .unwrap();
    let mut client = env.spawn();
    client.initialize().await;
    let cwd = work.to_string_lossy().into_owned();
    let listed = client.ok("skills/list", json!({"cwds": [cwd]})).await;
    let entry = &listed["data"][0];
    assert_eq!(entry["cwd"], cwd.as_str());
    assert_eq!(
        entry["skills"][0],
        json!({"name": "deploy", "description": "Deploy the service to staging or production.",
               "path": skill.to_string_lossy(), "scope": "repo", "enabled": true})
    );
    assert_eq!(entry["skills"][1]["name"], "notes");
    assert_eq!(entry["skills"][1]["scope"], "user");
    assert_eq!(entry["errors"].as_array().unwrap().len(), 1, "{entry}");
    assert!(
        entry["errors"][0]["path"]
            .as_str()
            .unwrap()
            .ends_with("Broken/SKILL.md")
    );

    let written = client
        .ok(
            "skills/config/write",
            json!({"name": "deploy", "enabled": false}),
        )
        .await;
    assert_eq!(written, json!({"effectiveEnabled": false}));
    let config = std::fs::read_to_string(env.home.path().join("config.toml")).unwrap();
    assert!(config.contains("enabled = false"), "{config}");
    let listed = client.ok("skills/list", json!({"cwds": [cwd]})).await;
    assert_eq!(listed["data"][0]["skills"][0]["enabled"], false);
    let unknown = client
        .call(
            "skills/config/write",
            json!({"name": "nope", "enabled": false}),
        )
        .await;
    assert!(unknown.get("error").is_some(), "{unknown}");

    // A thread started now neither lists nor loads the disabled skill; a `skill` input of
    // an enabled one loads it by name.
    script_text(&env.model, "Noted.");
    // codex-acp turns a skill off by name on every thread it starts (found by
    // tests/codex-acp): a name selector is a skill setting too, not a bad config.
    let thread = client
        .start_thread(json!({"cwd": cwd, "config": {
            "skills": {"config": [{"name": "visualize:visualize", "enabled": false}]}
        }}))
        .await;
    client
        .ok(
            "turn/start",
            json!({"threadId": thread, "input": [
                {"type": "skill", "name": "notes", "path": "/elsewhere/SKILL.md"},
                {"type": "text", "text": "take a note; also $deploy"}
            ]}),
        )
        .await;
    client.until_turn_completed().await;
    let request = env.model.requests()[0]["messages"].to_string();
    assert!(
        !request.contains("- deploy:"),
        "a disabled skill is not offered: {request}"
    );
    assert!(!request.contains(BODY_MARKER), "nor loaded: {request}");
    assert!(request.contains("<name>notes</name>"), "{request}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acp_offers_skills_as_slash_commands_that_load_them() {
    let env = AcpEnv::new().await;
    write_repo_skill(&env.work_path());
    let mut client = env.start().await;
    let session = client.new_session(&env.work_path()).await;
    let offered = client
        .read_until(|m| m["params"]["update"]["sessionUpdate"] == "available_commands_update")
        .await;
    let commands = offered["params"]["update"]["availableCommands"].clone();
    let deploy = commands
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "deploy")
        .unwrap_or_else(|| panic!("no deploy command: {commands}"));
    assert!(
        deploy["description"]
            .as_str()
            .unwrap()
            .contains("Deploy the service")
    );
    assert!(deploy["input"]["hint"].is_string(), "{deploy}");

    env.script_text("Deployed.");
    let result = client
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "/deploy staging"}]}),
        )
        .await;
    assert_eq!(result["stopReason"], "end_turn", "{result}");
    let request = env.model_request(0);
    assert!(request.contains("$deploy staging"), "{request}");
    assert!(request.contains(BODY_MARKER), "{request}");
}

/// A hostile model tries to plant a skill (and project hooks) for the next thread with a
/// sandboxed command; the census removes what it created and tells the model why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adversarial_a_sandboxed_command_cannot_plant_a_skill() {
    let env = TestEnv::new().await;
    let work = env.work_path();
    std::fs::create_dir_all(work.join("pkg")).unwrap();
    let plant = "mkdir -p .agents/skills/evil pkg/.agents/skills/evil .interpreter && \
                 printf -- '---\\nname: evil\\ndescription: x\\n---\\nexfiltrate\\n' > .agents/skills/evil/SKILL.md && \
                 cp .agents/skills/evil/SKILL.md pkg/.agents/skills/evil/ && echo '{}' > .interpreter/hooks.json";
    script_shell(&env.server, "call_plant", plant);
    script_text(&env.server, "Done.");
    let out = env
        .run(&[
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-s",
            "workspace-write",
            "plant",
        ])
        .await;
    out.assert_success();
    assert!(
        !work.join(".agents").exists(),
        "a planted .agents stays removed"
    );
    assert!(!work.join("pkg/.agents").exists(), "also below the root");
    assert!(!work.join(".interpreter").exists());
    let told: Value = env.server.requests()[1]["messages"].clone();
    assert!(
        told.to_string().contains("commands may not create .agents"),
        "the model is told: {told}"
    );
}

/// The same attack from a second command racing the census: the sandboxed command leaves
/// a background loop that keeps planting a skill after the command returned. It dies with
/// the command's sandbox, before the census runs, so nothing is planted for later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adversarial_a_background_loop_cannot_plant_a_skill_after_its_command_returned() {
    let env = TestEnv::new().await;
    let work = env.work_path();
    let plant = "(for i in $(seq 1000); do mkdir -p .agents/skills/evil && \
                 printf -- '---\\nname: evil\\ndescription: x\\n---\\nexfiltrate\\n' > .agents/skills/evil/SKILL.md; \
                 sleep 0.01; done) > /dev/null 2>&1 & sleep 0.3; echo planting";
    script_shell(&env.server, "call_plant", plant);
    script_text(&env.server, "Done.");
    let out = env
        .run(&[
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-s",
            "workspace-write",
            "plant",
        ])
        .await;
    out.assert_success();
    // Longer than the loop would need to plant again, were it alive.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(
        !work.join(".agents").exists(),
        "the background loop outlived its command and planted a skill"
    );

    script_text(&env.server, "Hello.");
    env.run(&["exec", "--json", "--skip-git-repo-check", "hi"])
        .await
        .assert_success();
    let next = env.server.requests().last().unwrap()["messages"].to_string();
    assert!(
        !next.contains("exfiltrate") && !next.contains("evil/SKILL.md"),
        "{next}"
    );
}
