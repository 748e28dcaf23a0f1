//! `account/*`: open-model providers authenticate with an API key. A key given to
//! `account/login/start` is saved in the engine's one credential store for the configured
//! provider; the provider's `env_key` variable, when set, still wins over it.

use std::sync::Arc;

use interpreter_core::config::credentials;

use crate::connection::Connection;
use crate::error::AppServerError;
use crate::protocol::notification_names;
use crate::protocol::v2;
use crate::state::{Reply, ServerState};

/// Whether the configured provider has a key, and from where.
pub(crate) async fn current_key(state: &ServerState) -> Result<Option<String>, AppServerError> {
    let config = state.base_config().await?;
    let provider = &config.model_provider;
    Ok(interpreter_model_client::api_key(provider, &config.env))
}

pub(crate) async fn read(
    state: &ServerState,
    _params: v2::AccountReadParams,
) -> Result<Reply, AppServerError> {
    let account = current_key(state).await?.map(|_| v2::Account::ApiKey);
    Reply::new(&v2::AccountReadResponse {
        account,
        requires_openai_auth: false,
    })
}

pub(crate) async fn login_start(
    state: &ServerState,
    connection: &Arc<Connection>,
    params: v2::LoginAccountParams,
) -> Result<Reply, AppServerError> {
    let api_key = match params {
        v2::LoginAccountParams::ApiKey { api_key } => api_key,
        v2::LoginAccountParams::Chatgpt | v2::LoginAccountParams::ChatgptDeviceCode => {
            return Err(AppServerError::InvalidRequest(
                "ChatGPT login is not available: open-model providers use an API key \
                 (account/login/start with type \"apiKey\")"
                    .into(),
            ));
        }
    };
    if api_key.trim().is_empty() {
        return Err(AppServerError::InvalidParams("apiKey is empty".into()));
    }
    let config = state.base_config().await?;
    let home = config.home.clone();
    let provider_id = config.model_provider_id.clone();
    tokio::task::spawn_blocking(move || {
        credentials::store_api_key(&home, &provider_id, api_key.trim())
    })
    .await
    .map_err(|e| AppServerError::Internal(e.to_string()))?
    .map_err(|e| AppServerError::Internal(e.to_string()))?;
    let notify_to = connection.clone();
    Ok(
        Reply::new(&v2::LoginAccountResponse::ApiKey)?.then(move || {
            notify_to.notify(
                notification_names::ACCOUNT_LOGIN_COMPLETED,
                &v2::AccountLoginCompletedNotification {
                    login_id: None,
                    success: true,
                    error: None,
                },
            );
            notify_to.notify(
                notification_names::ACCOUNT_UPDATED,
                &v2::AccountUpdatedNotification {
                    auth_mode: Some("apikey".into()),
                    plan_type: None,
                },
            );
        }),
    )
}

/// API-key logins finish at once, so there is never a login to cancel.
pub(crate) fn login_cancel(_params: v2::CancelLoginAccountParams) -> Result<Reply, AppServerError> {
    Reply::new(&v2::CancelLoginAccountResponse {
        status: v2::CancelLoginAccountStatus::NotFound,
    })
}

pub(crate) async fn logout(
    state: &ServerState,
    connection: &Arc<Connection>,
) -> Result<Reply, AppServerError> {
    let config = state.base_config().await?;
    let home = config.home.clone();
    let provider_id = config.model_provider_id.clone();
    tokio::task::spawn_blocking(move || credentials::remove_api_key(&home, &provider_id))
        .await
        .map_err(|e| AppServerError::Internal(e.to_string()))?
        .map_err(|e| AppServerError::Internal(e.to_string()))?;
    let notify_to = connection.clone();
    Ok(Reply::new(&v2::EmptyResponse {})?.then(move || {
        notify_to.notify(
            notification_names::ACCOUNT_UPDATED,
            &v2::AccountUpdatedNotification {
                auth_mode: None,
                plan_type: None,
            },
        );
    }))
}

/// Open-model endpoints publish no plan limits: an honest empty snapshot.
pub(crate) fn rate_limits() -> Result<Reply, AppServerError> {
    Reply::new(&v2::GetAccountRateLimitsResponse {
        rate_limits: v2::RateLimitSnapshot::default(),
        rate_limits_by_limit_id: None,
        rate_limit_reset_credits: None,
    })
}
