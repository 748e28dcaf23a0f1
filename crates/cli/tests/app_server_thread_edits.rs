//! Thread methods of `interpreter app-server` that change a thread after the fact, as
//! Codex 0.171 serves them: `thread/metadata/update`.

// Test code: a failed expectation should panic with its message.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod app_server_support;

use app_server_support::AppEnv;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_update_patches_git_info_and_survives_a_restart_and_a_rebuilt_index() {
    let env = AppEnv::new().await;
    env.script_text("hello");
    let thread_id = {
        let mut client = env.spawn();
        client.initialize().await;
        let thread_id = client.start_thread(json!({})).await;
        client.start_turn(&thread_id, "hi").await;
        client.until_turn_completed().await;

        let updated = client
            .ok(
                "thread/metadata/update",
                json!({"threadId": thread_id, "gitInfo": {
                    "branch": "main", "sha": "abc123", "originUrl": "https://example.com/r.git"
                }}),
            )
            .await;
        assert_eq!(
            updated["thread"]["gitInfo"],
            json!({"branch": "main", "sha": "abc123", "originUrl": "https://example.com/r.git"})
        );
        assert_eq!(updated["thread"]["id"], thread_id);

        // Absent: unchanged; null: cleared; string: replaced.
        let patched = client
            .ok(
                "thread/metadata/update",
                json!({"threadId": thread_id, "gitInfo": {"branch": "topic", "sha": null}}),
            )
            .await;
        assert_eq!(
            patched["thread"]["gitInfo"],
            json!({"branch": "topic", "sha": null, "originUrl": "https://example.com/r.git"})
        );
        let listed = client.ok("thread/list", json!({})).await;
        assert_eq!(listed["data"][0]["gitInfo"]["branch"], "topic");

        for bad in [
            json!({"threadId": thread_id, "gitInfo": {"branch": "  "}}),
            json!({"threadId": thread_id}),
            json!({"threadId": "0190f1b2-0000-7000-8000-000000000000", "gitInfo": {"sha": "x"}}),
        ] {
            let answer = client.call("thread/metadata/update", bad).await;
            assert_eq!(answer["error"]["code"], -32600, "{answer}");
        }
        thread_id
    };

    // A new server reads it from the index.
    {
        let mut client = env.spawn();
        client.initialize().await;
        let read = client
            .ok("thread/read", json!({"threadId": thread_id}))
            .await;
        assert_eq!(read["thread"]["gitInfo"]["branch"], "topic");
        assert_eq!(read["thread"]["gitInfo"]["sha"], Value::Null);
        let resumed = client
            .ok("thread/resume", json!({"threadId": thread_id}))
            .await;
        assert_eq!(
            resumed["thread"]["gitInfo"]["originUrl"],
            "https://example.com/r.git"
        );
    }

    // The index is a cache: rebuilt from the rollouts, it takes the metadata back from
    // the decision log.
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(env.home.path().join(format!("state.sqlite{suffix}")));
    }
    let mut client = env.spawn();
    client.initialize().await;
    let read = client
        .ok("thread/read", json!({"threadId": thread_id}))
        .await;
    assert_eq!(read["thread"]["gitInfo"]["branch"], "topic", "{read}");

    // Clearing every field stores no metadata at all.
    let cleared = client
        .ok(
            "thread/metadata/update",
            json!({"threadId": thread_id, "gitInfo": {"branch": null, "originUrl": null}}),
        )
        .await;
    assert_eq!(cleared["thread"]["gitInfo"], Value::Null);
}
