//! Fleet mode through the real binary: three `interpreter mcp-server` replicas on one
//! PostgreSQL thread store, behind a real nginx balancing round-robin, driven by a
//! 2026-07-28 client over HTTP with every wait bounded.
//!
//! Needs `INTERPRETER_TEST_PG_URL` (a PostgreSQL from `scripts/postgres`) and nginx
//! (`INTERPRETER_NGINX`, else `/usr/sbin/nginx` or PATH; `scripts/nginx ensure` installs
//! Debian's). Skipped without them unless `INTERPRETER_REQUIRE_PG=1` (set by
//! `scripts/test`), where a missing one fails.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use interpreter_test_support::mock_model::chunk;
use interpreter_test_support::{MockModelServer, MockResponse, postgres};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::time::Instant;

/// Any single answer the test waits for.
const DEADLINE: Duration = Duration::from_secs(60);
/// The bound on taking over a dead replica's thread.
const TAKEOVER_BOUND: Duration = Duration::from_secs(30);
/// The error code of a request about a thread another live replica runs.
const RUNS_ELSEWHERE: i64 = -32050;
/// Config for scenarios whose commands run without approval or sandbox.
const RUNS_COMMANDS_UNASKED: &str =
    "approval_policy = \"never\"\nsandbox_mode = \"danger-full-access\"";
/// nginx sends this `Host` (its upstream's name); replicas accept it with --allow-host.
const UPSTREAM: &str = "fleet";

fn nginx_binary() -> Option<PathBuf> {
    let found = std::env::var_os("INTERPRETER_NGINX")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|dir| dir.join("nginx"))
                    .find(|p| p.is_file())
            })
        })
        .or_else(|| Some(PathBuf::from("/usr/sbin/nginx")))
        .filter(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var("INTERPRETER_REQUIRE_PG").as_deref() != Ok("1"),
            "INTERPRETER_REQUIRE_PG=1 but there is no nginx: run scripts/nginx ensure"
        );
        eprintln!("no nginx: skipping the fleet test");
    }
    found
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name} {pid}");
}

/// One replica: its own home (config + logs), the fleet's shared token and key files.
struct Replica {
    name: String,
    home: TempDir,
    port: u16,
    child: Option<Child>,
    /// Every log of every run of this replica, oldest first.
    runs: usize,
}

impl Replica {
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    fn log(&self, run: usize) -> PathBuf {
        self.home.path().join(format!("stderr-{run}.log"))
    }

    fn stderr(&self) -> String {
        (0..self.runs)
            .map(|run| std::fs::read_to_string(self.log(run)).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    async fn start(&mut self, fleet: &FleetFiles, work: &Path) {
        let log = std::fs::File::create(self.log(self.runs)).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_interpreter"))
            .args([
                "mcp-server",
                "--listen",
                &self.url(),
                "--token-file",
                fleet.token.to_str().unwrap(),
                "--allow-host",
                UPSTREAM,
            ])
            .current_dir(work)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("INTERPRETER_HOME", self.home.path())
            .env("MOCK_API_KEY", "test-key")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let run = self.runs;
        self.runs += 1;
        let deadline = Instant::now() + DEADLINE;
        loop {
            let text = std::fs::read_to_string(self.log(run)).unwrap_or_default();
            if text.contains("listening on ") {
                // Every replica names the shared database, and none runs on its own home.
                assert!(text.contains("thread store: postgres ("), "{text}");
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not start: {text}",
                self.name
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// SIGTERM, and a bounded wait for the exit.
    async fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        signal(child.id(), "TERM");
        let deadline = Instant::now() + DEADLINE;
        while child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "{} did not stop", self.name);
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            // A stopped process would not die of SIGKILL's queue until continued.
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
        }
        self.kill();
    }
}

/// Files every replica shares, as a fleet's replicas would on a common mount.
struct FleetFiles {
    token: PathBuf,
}

struct Nginx {
    child: Child,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Fleet {
    model: MockModelServer,
    replicas: Vec<Replica>,
    files: FleetFiles,
    _shared: TempDir,
    work: TempDir,
    token: String,
    nginx_url: String,
    _nginx: Nginx,
    http: reqwest::Client,
    pg_url: String,
}

impl Fleet {
    /// Three replicas and nginx, or `None` when PostgreSQL or nginx is missing.
    async fn start(extra_config: &str) -> Option<Self> {
        let pg_url = postgres::test_url()?;
        let nginx = nginx_binary()?;
        let model = MockModelServer::start().await.unwrap();
        let shared = TempDir::new().unwrap();
        let work = TempDir::new().unwrap();
        let files = FleetFiles {
            token: shared.path().join("mcp-server.token"),
        };
        let keys = shared.path().join("request-state.keys");
        let fleet_keys = shared.path().join("fleet.keys");
        let config = format!(
            "model = \"mock-model\"\nmodel_provider = \"mock\"\nthread_store = \"{pg_url}\"\n{extra_config}\n\n\
             mcp_server.request_state_key_file = \"{}\"\n\
             mcp_server.fleet_key_file = \"{}\"\n\n\
             [model_providers.mock]\nname = \"mock\"\nbase_url = \"{}\"\nenv_key = \"MOCK_API_KEY\"\n\
             wire_api = \"chat\"\nrequest_max_retries = 0\nstream_max_retries = 0\n",
            keys.display(),
            fleet_keys.display(),
            model.base_url()
        );
        let mut replicas = Vec::new();
        for index in 1..=3 {
            let home = TempDir::new().unwrap();
            std::fs::write(home.path().join("config.toml"), &config).unwrap();
            replicas.push(Replica {
                name: format!("r{index}"),
                home,
                port: free_port(),
                child: None,
                runs: 0,
            });
        }
        for replica in &mut replicas {
            replica.start(&files, work.path()).await;
        }
        let token = std::fs::read_to_string(&files.token)
            .unwrap()
            .trim()
            .to_string();

        let nginx_dir = shared.path().join("nginx");
        std::fs::create_dir_all(nginx_dir.join("logs")).unwrap();
        let nginx_port = free_port();
        let servers: String = replicas
            .iter()
            .map(|r| {
                format!(
                    "    server 127.0.0.1:{} max_fails=1 fail_timeout=5s;\n",
                    r.port
                )
            })
            .collect();
        let conf = format!(
            // One process (no master): killing it leaves no worker behind holding the port.
            "master_process off;\nworker_processes 1;\nerror_log {dir}/logs/error.log warn;\n\
             events {{ worker_connections 256; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {dir}/body;\n\
               proxy_temp_path {dir}/proxy;\n  fastcgi_temp_path {dir}/fastcgi;\n\
               uwsgi_temp_path {dir}/uwsgi;\n  scgi_temp_path {dir}/scgi;\n\
               upstream {UPSTREAM} {{\n{servers}  }}\n\
               server {{\n    listen 127.0.0.1:{nginx_port};\n\
                 location /mcp {{\n      proxy_pass http://{UPSTREAM};\n      proxy_http_version 1.1;\n\
                   proxy_buffering off;\n      proxy_read_timeout 3600s;\n    }}\n  }}\n}}\n",
            dir = nginx_dir.display()
        );
        let conf_path = nginx_dir.join("nginx.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let child = Command::new(nginx)
            .arg("-p")
            .arg(&nginx_dir)
            .arg("-c")
            .arg(&conf_path)
            .arg("-g")
            .arg(format!(
                "daemon off; pid {}/nginx.pid;",
                nginx_dir.display()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let nginx = Nginx { child };
        let nginx_url = format!("http://127.0.0.1:{nginx_port}/mcp");
        let deadline = Instant::now() + DEADLINE;
        while std::net::TcpStream::connect(("127.0.0.1", nginx_port)).is_err() {
            assert!(Instant::now() < deadline, "nginx did not start");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        Some(Self {
            model,
            replicas,
            files,
            _shared: shared,
            work,
            token,
            nginx_url,
            _nginx: nginx,
            http: reqwest::Client::builder()
                .timeout(DEADLINE)
                .build()
                .unwrap(),
            pg_url,
        })
    }

    fn answer(&self, text: &str) {
        self.model.push(MockResponse::sse(vec![
            chunk::text(text),
            chunk::finish("stop"),
            chunk::usage(5, 2),
        ]));
    }

    fn command_then(&self, call_id: &str, command: &str, text: &str) {
        let arguments = json!({"command": command}).to_string();
        self.model.push(MockResponse::sse(vec![
            chunk::tool_call(0, call_id, "shell", &arguments),
            chunk::finish("tool_calls"),
        ]));
        self.answer(text);
    }

    /// A 2026-07-28 `tools/call` to `url`, with the routing headers the protocol asks
    /// for; the JSON-RPC response.
    async fn call(&self, url: &str, tool: &str, params: Value) -> Value {
        let text = self.call_raw(url, tool, params).await;
        if let Ok(value) = serde_json::from_str::<Value>(&text) {
            return value;
        }
        sse_messages(&text)
            .into_iter()
            .rfind(|m| m.get("id").is_some() && m.get("method").is_none())
            .unwrap_or_else(|| panic!("no JSON-RPC response from {url}: {text}"))
    }

    /// [`Fleet::call`]'s whole response body (the SSE stream, notifications included).
    async fn call_raw(&self, url: &str, tool: &str, mut params: Value) -> String {
        params["name"] = json!(tool);
        let progress_token = params["_meta"]["progressToken"].clone();
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
            "io.modelcontextprotocol/clientInfo": {"name": "fleet-test", "version": "0"},
        });
        if !progress_token.is_null() {
            params["_meta"]["progressToken"] = progress_token;
        }
        let mut request = self
            .http
            .post(url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("Authorization", format!("Bearer {}", self.token))
            .header("MCP-Protocol-Version", "2026-07-28")
            .header("Mcp-Method", "tools/call")
            .header("Mcp-Name", tool);
        if let Some(thread_id) = params["arguments"]["threadId"].as_str() {
            request = request.header("Mcp-Param-ThreadId", thread_id);
        }
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
        let response = request.json(&body).send().await.unwrap();
        response.text().await.unwrap()
    }

    /// A 2026-07-28 Tasks-extension request (`tasks/get`, `tasks/update`, or a
    /// `tools/call` that asks for a task), routed by `Mcp-Name` as the extension says.
    async fn task_request(&self, url: &str, method: &str, name: &str, mut params: Value) -> Value {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {
                "elicitation": {"form": {}},
                "extensions": {"io.modelcontextprotocol/tasks": {}},
            },
            "io.modelcontextprotocol/clientInfo": {"name": "fleet-test", "version": "0"},
        });
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let text = self
            .http
            .post(url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("Authorization", format!("Bearer {}", self.token))
            .header("MCP-Protocol-Version", "2026-07-28")
            .header("Mcp-Method", method)
            .header("Mcp-Name", name)
            .json(&body)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        serde_json::from_str::<Value>(&text)
            .ok()
            .or_else(|| {
                sse_messages(&text)
                    .into_iter()
                    .rfind(|m| m.get("id").is_some() && m.get("method").is_none())
            })
            .unwrap_or_else(|| panic!("no JSON-RPC response from {url}: {text}"))
    }

    /// `tasks/get` on `url` until the status is `status` (bounded).
    async fn poll_task(&self, url: &str, task_id: &str, status: &str) -> Value {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let got = self
                .task_request(url, "tasks/get", task_id, json!({"taskId": task_id}))
                .await;
            assert!(got.get("error").is_none(), "{got}");
            if got["result"]["status"] == status {
                return got["result"].clone();
            }
            assert!(Instant::now() < deadline, "task never {status}: {got}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A background `codex` on `url` whose model answer is only `command` (no answer
    /// after it is scripted); returns the thread id once the replica asked the model, so
    /// the command is starting.
    async fn background_command_on(&self, url: &str, call_id: &str, command: &str) -> String {
        let arguments = json!({"command": command}).to_string();
        self.model.push(MockResponse::sse(vec![
            chunk::tool_call(0, call_id, "shell", &arguments),
            chunk::finish("tool_calls"),
        ]));
        let started = self
            .codex(
                url,
                json!({"prompt": format!("run {call_id}"), "background": true}),
            )
            .await;
        let thread_id = thread_of(&started);
        let deadline = Instant::now() + DEADLINE;
        while self.model.requests().is_empty() {
            assert!(Instant::now() < deadline, "{url} never asked the model");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        thread_id
    }

    /// A background turn on `url` that runs `sleep 3`, then answers "rested"; its thread,
    /// once the replica asked the model. A background `codex` answers as soon as the turn
    /// is submitted; the replica takes the thread's lease when the turn starts, just
    /// before asking the model, so until then another replica may still find it free.
    async fn background_nap(&self, url: &str) -> String {
        self.command_then("call_nap", "sleep 3", "rested");
        let asked = self.model.requests().len();
        let started = self
            .codex(url, json!({"prompt": "take a nap", "background": true}))
            .await;
        let deadline = Instant::now() + DEADLINE;
        while self.model.requests().len() == asked {
            assert!(Instant::now() < deadline, "{url} never asked the model");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        thread_of(&started)
    }

    async fn codex(&self, url: &str, arguments: Value) -> Value {
        self.call(url, "codex", json!({"arguments": arguments}))
            .await
    }

    async fn reply(&self, url: &str, thread_id: &str, prompt: &str) -> Value {
        self.call(
            url,
            "codex-reply",
            json!({"arguments": {"threadId": thread_id, "prompt": prompt}}),
        )
        .await
    }

    /// `codex-reply` until it is not refused retryably (the thread runs elsewhere, or its
    /// owner stopped while the call waited on it), bounded by `bound`.
    async fn reply_when_free(
        &self,
        url: &str,
        thread_id: &str,
        prompt: &str,
        bound: Duration,
    ) -> (Value, usize) {
        let deadline = Instant::now() + bound;
        let mut refusals = 0;
        loop {
            let answer = self.reply(url, thread_id, prompt).await;
            let data = &answer["error"]["data"];
            if data["retryable"] != true {
                return (answer, refusals);
            }
            if answer["error"]["code"] == RUNS_ELSEWHERE {
                assert_eq!(data["retryAfterMs"], 2000, "{answer}");
            }
            assert_eq!(data["threadId"], thread_id, "{answer}");
            refusals += 1;
            assert!(
                Instant::now() < deadline,
                "still refused after {bound:?}: {answer}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The requests the model saw whose last user message contains `marker`.
    fn requests_ending_with(&self, marker: &str) -> Vec<Value> {
        self.model
            .requests()
            .into_iter()
            .filter(|request| {
                request["messages"]
                    .as_array()
                    .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
                    // With its closing quote, so `thread 1` is not `thread 10`.
                    .is_some_and(|m| m["content"].to_string().contains(&format!("{marker}\"")))
            })
            .collect()
    }

    /// What someone who can write the database does to steal a thread's requests: a
    /// replica row advertising `url`, heartbeating, and the thread leased to it.
    async fn plant_owner(&self, thread_id: &str, url: &str) {
        let (db, connection) = tokio_postgres::connect(&self.pg_url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        let replica = format!("planted-{thread_id}");
        db.execute(
            "INSERT INTO interpreter_replicas (id, internal_url) VALUES ($1, $2)",
            &[&replica, &url],
        )
        .await
        .unwrap();
        let updated = db
            .execute(
                "UPDATE interpreter_threads SET owner = $1, lease_epoch = lease_epoch + 1, \
                 lease_expires_at = now() + interval '10 minutes' WHERE id = $2",
                &[&replica, &thread_id],
            )
            .await
            .unwrap();
        assert_eq!(updated, 1, "no thread {thread_id} to plant an owner on");
    }

    /// The thread's rollout as `threads export` writes it, from a machine that shares
    /// only the store URL.
    fn export(&self, thread_id: &str) -> String {
        let home = TempDir::new().unwrap();
        let store = format!("thread_store=\"{}\"", self.pg_url);
        let out = Command::new(env!("CARGO_BIN_EXE_interpreter"))
            .args(["-c", &store, "threads", "export", thread_id])
            .current_dir(self.work.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("INTERPRETER_HOME", home.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

/// An attacker's HTTP listener: records every request it receives (head and body) and
/// answers each with a 500.
struct Eavesdropper {
    url: String,
    requests: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Eavesdropper {
    async fn start(ip: &str) -> Self {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = requests.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut bytes = Vec::new();
                    let mut buffer = [0u8; 8192];
                    // Until the head and as much body as it announces, bounded in time.
                    let read = async {
                        loop {
                            let n = stream.read(&mut buffer).await.unwrap_or(0);
                            if n == 0 {
                                break;
                            }
                            bytes.extend_from_slice(&buffer[..n]);
                            let text = String::from_utf8_lossy(&bytes).to_string();
                            if let Some(end) = text.find("\r\n\r\n") {
                                let length = text[..end]
                                    .lines()
                                    .find_map(|l| {
                                        let (name, value) = l.split_once(':')?;
                                        name.eq_ignore_ascii_case("content-length")
                                            .then(|| value.trim().parse::<usize>().ok())?
                                    })
                                    .unwrap_or(0);
                                if bytes.len() >= end + 4 + length {
                                    break;
                                }
                            }
                        }
                    };
                    let _ = tokio::time::timeout(Duration::from_secs(10), read).await;
                    seen.lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&bytes).to_string());
                    let _ = stream
                        .write_all(
                            b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                        )
                        .await;
                });
            }
        });
        Self {
            url,
            requests,
            task,
        }
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for Eavesdropper {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The JSON-RPC messages of an SSE body, in order.
fn sse_messages(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .collect()
}

fn completed(answer: &Value) -> &Value {
    let result = &answer["result"];
    assert_eq!(result["resultType"], "complete", "{answer}");
    assert_eq!(result["isError"], false, "{answer}");
    &result["structuredContent"]
}

fn thread_of(answer: &Value) -> String {
    completed(answer)["threadId"]
        .as_str()
        .unwrap_or_else(|| panic!("no threadId: {answer}"))
        .to_string()
}

fn mentions(request: &Value, text: &str) -> bool {
    request["messages"].to_string().contains(text)
}

/// Twenty threads started and continued through nginx; one thread started on r1 and
/// continued on r2 and r3; then a rolling restart of all three, after which every thread
/// still continues with its whole history.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn threads_continue_on_any_replica_and_survive_a_rolling_restart() {
    let Some(mut fleet) = Fleet::start("").await else {
        return;
    };
    const THREADS: usize = 20;
    for _ in 0..THREADS * 2 {
        fleet.answer("noted");
    }
    let starts = (0..THREADS).map(|i| {
        let fleet = &fleet;
        async move {
            let answer = fleet
                .codex(
                    &fleet.nginx_url,
                    json!({"prompt": format!("start thread {i}")}),
                )
                .await;
            thread_of(&answer)
        }
    });
    let threads: Vec<String> = futures::future::join_all(starts).await;
    let replies = threads.iter().enumerate().map(|(i, thread_id)| {
        let fleet = &fleet;
        async move {
            let answer = fleet
                .reply(&fleet.nginx_url, thread_id, &format!("continue thread {i}"))
                .await;
            assert_eq!(&thread_of(&answer), thread_id);
        }
    });
    futures::future::join_all(replies).await;
    for i in 0..THREADS {
        let seen = fleet.requests_ending_with(&format!("continue thread {i}"));
        assert_eq!(seen.len(), 1, "thread {i}");
        assert!(
            mentions(&seen[0], &format!("start thread {i}\"")),
            "thread {i}: {}",
            seen[0]
        );
        let others = (0..THREADS)
            .filter(|j| *j != i)
            .filter(|j| mentions(&seen[0], &format!("start thread {j}\"")))
            .count();
        assert_eq!(others, 0, "thread {i} saw another thread's history");
    }
    // `codex` on r1, `codex-reply` on r2, then on r3.
    fleet.answer("one");
    fleet.answer("two");
    fleet.answer("three");
    let urls: Vec<String> = fleet.replicas.iter().map(Replica::url).collect();
    let thread_id = thread_of(&fleet.codex(&urls[0], json!({"prompt": "hop one"})).await);
    let second = fleet.reply(&urls[1], &thread_id, "hop two").await;
    assert_eq!(thread_of(&second), thread_id);
    let third = fleet.reply(&urls[2], &thread_id, "hop three").await;
    assert_eq!(completed(&third)["content"], "three");
    let seen = fleet.requests_ending_with("hop three");
    assert_eq!(seen.len(), 1);
    for earlier in ["hop one", "one", "hop two", "two"] {
        assert!(mentions(&seen[0], earlier), "{earlier}: {}", seen[0]);
    }

    // Rolling restart: each replica in turn stops (SIGTERM) and comes back on its port.
    let files = FleetFiles {
        token: fleet.files.token.clone(),
    };
    let work = fleet.work.path().to_path_buf();
    for index in 0..3 {
        fleet.replicas[index].stop().await;
        fleet.replicas[index].start(&files, &work).await;
    }
    for i in (0..THREADS).step_by(4) {
        fleet.answer("still here");
        let answer = fleet
            .reply(&fleet.nginx_url, &threads[i], &format!("after restart {i}"))
            .await;
        assert_eq!(completed(&answer)["content"], "still here");
        let seen = fleet.requests_ending_with(&format!("after restart {i}"));
        assert_eq!(seen.len(), 1);
        assert!(mentions(&seen[0], &format!("start thread {i}\"")));
        assert!(mentions(&seen[0], &format!("continue thread {i}\"")));
    }
    fleet.model.assert_invariants();
}

/// A replica killed with SIGKILL while its thread runs a command: the thread is refused
/// (retryably, naming the owner) while the dead replica's lease lasts, then another
/// replica takes it over within 30 s, records the lost turn as interrupted, and answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_replicas_thread_is_taken_over_within_the_lease() {
    let Some(mut fleet) = Fleet::start(RUNS_COMMANDS_UNASKED).await else {
        return;
    };
    let urls: Vec<String> = fleet.replicas.iter().map(Replica::url).collect();
    // Only the command: r1 dies running it, so it never asks the model again.
    let thread_id = fleet
        .background_command_on(&urls[0], "call_sleep", "sleep 30")
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    fleet.replicas[0].kill();
    let killed_at = Instant::now();

    fleet.answer("taken over");
    let (answer, refusals) = fleet
        .reply_when_free(&urls[1], &thread_id, "carry on", TAKEOVER_BOUND)
        .await;
    let took = killed_at.elapsed();
    assert!(took < TAKEOVER_BOUND, "took {took:?}");
    assert!(refusals > 0, "the dead replica's lease was honoured first");
    assert_eq!(completed(&answer)["content"], "taken over", "{answer}");
    let rollout = fleet.export(&thread_id);
    assert!(rollout.contains("\"turn_aborted\""), "{rollout}");
    let seen = fleet.requests_ending_with("carry on");
    assert_eq!(seen.len(), 1, "the lost turn was not replayed");
    fleet.model.assert_invariants();
}

/// A replica paused with SIGSTOP while its command runs loses the thread to another
/// replica after the lease; continued with SIGCONT, it cannot append anything to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paused_replica_is_fenced_after_a_takeover() {
    let Some(fleet) = Fleet::start(RUNS_COMMANDS_UNASKED).await else {
        return;
    };
    let urls: Vec<String> = fleet.replicas.iter().map(Replica::url).collect();
    // Only the command: once fenced, r1 must never ask the model again (an unscripted
    // request would show as a violation). Its output (`zombie-42`) differs from its
    // text, which the rollout holds anyway.
    let thread_id = fleet
        .background_command_on(&urls[0], "call_zombie", "sleep 2; echo zombie-$((40 + 2))")
        .await;
    // The command starts right after the model's answer; pause r1 while it sleeps.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let paused = fleet.replicas[0].pid();
    signal(paused, "STOP");

    fleet.answer("took it");
    let (answer, _) = fleet
        .reply_when_free(&urls[1], &thread_id, "you there?", TAKEOVER_BOUND)
        .await;
    assert_eq!(completed(&answer)["content"], "took it", "{answer}");

    signal(paused, "CONT");
    // r1 wakes, its command has finished, and its next append is refused.
    let deadline = Instant::now() + DEADLINE;
    while !fleet.replicas[0]
        .stderr()
        .contains("taken over by another process")
    {
        assert!(
            Instant::now() < deadline,
            "r1 never hit the fence: {}",
            fleet.replicas[0].stderr()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let rollout = fleet.export(&thread_id);
    assert!(!rollout.contains("zombie-42"), "{rollout}");
    assert!(rollout.contains("took it"), "{rollout}");
    fleet.model.assert_invariants();
}

/// An MRTR approval asked by r1 and answered through r2: r2 opens the shared-key state
/// and forwards the retry to r1, where the turn waits; the command runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_approval_is_answered_through_another_replica() {
    let Some(fleet) = Fleet::start("").await else {
        return;
    };
    let urls: Vec<String> = fleet.replicas.iter().map(Replica::url).collect();
    fleet.command_then("call_approve", "touch approved.txt", "Finished.");
    let arguments = json!({"prompt": "make the file", "approval-policy": "untrusted", "sandbox": "danger-full-access"});
    let asked = fleet.codex(&urls[0], arguments.clone()).await;
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    let state = result["requestState"].as_str().unwrap().to_string();
    assert!(!fleet.work.path().join("approved.txt").exists());

    let retry = json!({
        "arguments": arguments,
        "inputResponses": {"approval": {"action": "accept", "content": {"decision": "approved"}}},
        "requestState": state,
    });
    let done = fleet.call(&urls[1], "codex", retry.clone()).await;
    assert_eq!(completed(&done)["content"], "Finished.", "{done}");
    assert!(fleet.work.path().join("approved.txt").exists());
    assert!(
        fleet.replicas[1].stderr().contains("forwarding tools/call"),
        "{}",
        fleet.replicas[1].stderr()
    );
    // The same state through r3: redeemed already, nothing runs again.
    let replay = fleet.call(&urls[2], "codex", retry).await;
    assert!(replay.get("error").is_some(), "{replay}");
}

/// A turn running on r1, followed with `codex-wait` through r2: r2 forwards the call to
/// r1 and relays both r1's progress notifications (for the caller's own token) and the
/// final answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_running_thread_is_followed_through_another_replica() {
    let config = format!("{RUNS_COMMANDS_UNASKED}\nmcp_server.progress_interval_sec = 1");
    let Some(fleet) = Fleet::start(&config).await else {
        return;
    };
    let urls: Vec<String> = fleet.replicas.iter().map(Replica::url).collect();
    let thread_id = fleet.background_nap(&urls[0]).await;
    let body = fleet
        .call_raw(
            &urls[1],
            "codex-wait",
            json!({
                "arguments": {"threadId": thread_id, "timeoutSec": 60},
                "_meta": {"progressToken": "nap-progress"},
            }),
        )
        .await;
    let messages = sse_messages(&body);
    let answer = messages
        .iter()
        .rfind(|m| m.get("id").is_some() && m.get("method").is_none())
        .unwrap_or_else(|| panic!("no answer: {body}"));
    assert_eq!(completed(answer)["content"], "rested", "{body}");
    let progress: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert!(!progress.is_empty(), "no progress relayed: {body}");
    assert!(
        progress
            .iter()
            .all(|m| m["params"]["progressToken"] == "nap-progress"),
        "{body}"
    );
    assert!(
        fleet.replicas[1].stderr().contains("forwarding tools/call"),
        "{}",
        fleet.replicas[1].stderr()
    );
}

/// A task started on r1 is polled on r2 (forwarded: its approval is live on r1),
/// answered through r3 (forwarded), and read as completed on r2 once the turn is over
/// (from the store).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_task_is_polled_and_answered_through_other_replicas() {
    let Some(fleet) = Fleet::start("").await else {
        return;
    };
    let urls: Vec<String> = fleet.replicas.iter().map(Replica::url).collect();
    fleet.command_then("call_task", "touch task.txt", "Task done.");
    let created = fleet
        .task_request(
            &urls[0],
            "tools/call",
            "codex",
            json!({"name": "codex", "arguments": {"prompt": "make task.txt", "approval-policy": "untrusted", "sandbox": "danger-full-access"}}),
        )
        .await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let task_id = created["result"]["taskId"].as_str().unwrap().to_string();

    let waiting = fleet.poll_task(&urls[1], &task_id, "input_required").await;
    let key = waiting["inputRequests"]
        .as_object()
        .and_then(|m| m.keys().next().cloned())
        .unwrap_or_else(|| panic!("{waiting}"));
    assert!(!fleet.work.path().join("task.txt").exists());
    let ack = fleet
        .task_request(
            &urls[2],
            "tasks/update",
            &task_id,
            json!({"taskId": task_id, "inputResponses": {key: {"action": "accept", "content": {"decision": "approved"}}}}),
        )
        .await;
    assert!(ack.get("error").is_none(), "{ack}");
    let done = fleet.poll_task(&urls[1], &task_id, "completed").await;
    assert_eq!(
        done["result"]["structuredContent"]["content"], "Task done.",
        "{done}"
    );
    assert!(fleet.work.path().join("task.txt").exists());
    for replica in [1, 2] {
        assert!(
            fleet.replicas[replica]
                .stderr()
                .contains("forwarding tasks/"),
            "{}",
            fleet.replicas[replica].stderr()
        );
    }
}

/// `doctor` on a machine of the fleet reports the shared store as the fleet sees it:
/// a turn running on r1, and the replicas heartbeating on the database (other tests'
/// fleets may share it, so at least these).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn doctor_sees_the_fleet_on_the_store() {
    let Some(fleet) = Fleet::start(RUNS_COMMANDS_UNASKED).await else {
        return;
    };
    let urls: Vec<String> = fleet.replicas.iter().map(Replica::url).collect();
    let thread_id = fleet.background_nap(&urls[0]).await;

    let home = fleet.replicas[1].home.path();
    let out = Command::new(env!("CARGO_BIN_EXE_interpreter"))
        .args(["doctor", "--json"])
        .current_dir(fleet.work.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("INTERPRETER_HOME", home)
        .env("MOCK_API_KEY", "test-key")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let state = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|check| check["name"] == "state")
        .unwrap_or_else(|| panic!("{report}"));
    assert_eq!(state["status"], "ok", "{state}");
    let detail = state["detail"].as_str().unwrap();
    let number_before = |marker: &str| -> u64 {
        let head = &detail[..detail.find(marker).unwrap_or_else(|| panic!("{detail}"))];
        let digits = head.rsplit(|c: char| !c.is_ascii_digit()).next().unwrap();
        digits.parse().unwrap_or_else(|_| panic!("{detail}"))
    };
    assert!(detail.starts_with("postgres ("), "{detail}");
    assert!(number_before(" running)") >= 1, "{detail}");
    assert!(number_before(" other live process") >= 3, "{detail}");

    let waited = fleet
        .call(
            &urls[0],
            "codex-wait",
            json!({"arguments": {"threadId": thread_id, "timeoutSec": 60}}),
        )
        .await;
    assert_eq!(completed(&waited)["content"], "rested", "{waited}");
    fleet.model.assert_invariants();
}

/// Someone who can write the database plants a replica row advertising their own
/// listener and leases a thread to it, then waits for a replica to forward that thread's
/// next request (with the fleet's bearer token, as replicas once did). The listener's
/// address is outside `fleet_forward_allow`, so it is never contacted: the caller gets
/// the retryable refusal saying why, the replica logs a warning, and nothing runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn adversarial_a_planted_replica_row_never_receives_the_token() {
    // The replicas listen on 127.0.0.1; the attacker on another loopback address.
    let Some(fleet) = Fleet::start("mcp_server.fleet_forward_allow = [\"127.0.0.1\"]").await else {
        return;
    };
    let urls: Vec<String> = fleet.replicas.iter().map(Replica::url).collect();
    let attacker = Eavesdropper::start("127.0.0.2").await;
    fleet.answer("started");
    let thread_id = thread_of(&fleet.codex(&urls[0], json!({"prompt": "begin"})).await);
    fleet.plant_owner(&thread_id, &attacker.url).await;

    let answer = fleet.reply(&urls[1], &thread_id, "steal this").await;
    let error = &answer["error"];
    assert_eq!(error["code"], RUNS_ELSEWHERE, "{answer}");
    assert_eq!(error["data"]["retryable"], true, "{answer}");
    let reason = error["data"]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("mcp_server.fleet_forward_allow"),
        "{answer}"
    );
    assert!(reason.contains(&attacker.url), "{answer}");
    assert!(attacker.requests().is_empty(), "{:?}", attacker.requests());
    let log = fleet.replicas[1].stderr();
    assert!(
        log.contains("warning: not forwarding tools/call") && log.contains(&attacker.url),
        "{log}"
    );
    assert!(fleet.requests_ending_with("steal this").is_empty());
}

/// The same planted row, but on an address the replicas do forward to (loopback, in the
/// default list). The listener receives the request, and nothing in it is worth
/// replaying: no `Authorization`, no token anywhere, only a signature bound to the
/// listener's own URL, which every real replica refuses (401, with the reason logged).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn adversarial_an_allowed_listener_gets_nothing_it_can_replay() {
    let Some(fleet) = Fleet::start("").await else {
        return;
    };
    let urls: Vec<String> = fleet.replicas.iter().map(Replica::url).collect();
    let attacker = Eavesdropper::start("127.0.0.1").await;
    fleet.answer("started");
    let thread_id = thread_of(&fleet.codex(&urls[0], json!({"prompt": "begin"})).await);
    fleet.plant_owner(&thread_id, &attacker.url).await;

    let answer = fleet.reply(&urls[1], &thread_id, "steal this").await;
    assert_eq!(answer["error"]["code"], RUNS_ELSEWHERE, "{answer}");
    let received = attacker.requests();
    assert_eq!(received.len(), 1, "{received:?}");
    let request = &received[0];
    let (head, body) = request.split_once("\r\n\r\n").unwrap();
    assert!(
        !head.to_ascii_lowercase().contains("authorization"),
        "{head}"
    );
    assert!(
        !request.contains(&fleet.token),
        "the token leaked: {request}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains("interpreter-replica-signature: v1;"),
        "{head}"
    );
    assert!(body.contains("steal this"), "{body}");

    // Replayed as received to real replicas: each refuses it.
    for replica in [1, 2] {
        let mut replay = fleet.http.post(&urls[replica]);
        for line in head.lines().skip(1) {
            let (name, value) = line.split_once(':').unwrap();
            if !["host", "content-length"].contains(&name.to_ascii_lowercase().as_str()) {
                replay = replay.header(name.trim(), value.trim());
            }
        }
        let response = replay.body(body.to_string()).send().await.unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        assert_eq!(status, 401, "{text}");
        assert!(text.contains("does not match"), "{text}");
        let log = fleet.replicas[replica].stderr();
        assert!(
            log.contains("warning: refused a forwarded request: its signature does not match"),
            "{log}"
        );
    }
    assert!(fleet.requests_ending_with("steal this").is_empty());
}
