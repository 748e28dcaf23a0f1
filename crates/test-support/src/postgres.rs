//! The PostgreSQL server the store tests run against: `scripts/test` starts one (Debian's
//! package, through `scripts/postgres`) and names it in `INTERPRETER_TEST_PG_URL`.

/// The test database's URL; `None` (skip the PostgreSQL half) when no server was started,
/// unless `INTERPRETER_REQUIRE_PG=1` (set by `scripts/test`), where a missing server is a
/// failure rather than a silent skip.
pub fn test_url() -> Option<String> {
    match std::env::var("INTERPRETER_TEST_PG_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var("INTERPRETER_REQUIRE_PG").as_deref() != Ok("1"),
                "INTERPRETER_REQUIRE_PG=1 but INTERPRETER_TEST_PG_URL is not set"
            );
            eprintln!("INTERPRETER_TEST_PG_URL is not set: skipping the PostgreSQL store");
            None
        }
    }
}
