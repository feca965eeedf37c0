//! A real router on 127.0.0.1 with simulated machines and Telegram pointed at the fake.

use super::*;

// === a real router, a fake Telegram ===

pub(crate) struct Lab {
    pub(crate) gpu: Sim,
    pub(crate) _cpu: Sim,
    pub(crate) _local: Sim,
    pub(crate) svc: Arc<Service>,
    pub(crate) base: String,
    pub(crate) client: reqwest::Client,
    pub(crate) tg: Running,
}

pub(crate) fn quick() -> Options {
    Options {
        outbox: Retries {
            capacity: 64,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
            max_age: Duration::from_secs(24 * 3600),
            max_bytes: 1 << 20,
        },
        // Over teloxide's 10s pause after a 5xx, which runs inside the request.
        send_timeout: Duration::from_secs(15),
        ..Options::default()
    }
}

impl Lab {
    pub(crate) async fn start(
        fake: &FakeTelegram,
        state_dir: Option<&std::path::Path>,
        digest_at: &str,
        opts: Options,
    ) -> Lab {
        let gpu = Sim::start("gpu-box").await.unwrap();
        let cpu = Sim::start("ubuntu-box").await.unwrap();
        let local = Sim::start("local").await.unwrap();
        let mut yaml = support::registry_yaml(&gpu, &cpu, &local, "");
        yaml.push_str(&format!(
            "telegram:\n  token_env: LABROUTER_TEST_NO_SUCH_VAR\n  chat_id: {CHAT}\n  api_url: \"{}\"\n  digest_at: \"{digest_at}\"\n  timezone: Europe/Berlin\n  page_after_cycles: 2\n",
            fake.url
        ));
        let reg = Registry::parse(&yaml, "test.yaml").unwrap();
        let config = reg.telegram.clone().unwrap();
        let svc = Arc::new(match state_dir {
            Some(dir) => {
                let reg = Registry::parse(
                    &yaml.replace(
                        "  max_body: 64KiB",
                        &format!("  max_body: 64KiB\n  state_dir: \"{}\"", dir.display()),
                    ),
                    "t.yaml",
                )
                .unwrap();
                Service::remembering(reg, None).unwrap()
            }
            None => Service::in_memory(reg, None).unwrap(),
        });
        let settings = Settings::with_token(&config, TOKEN).unwrap();
        let tg = labrouter::telegram::start(Arc::clone(&svc), settings, opts).unwrap();
        let (base, _) = support::serve(Arc::clone(&svc)).await;
        Lab {
            gpu,
            _cpu: cpu,
            _local: local,
            svc,
            base,
            // Pooled connections go before the router's 60 s idle timeout would close them.
            client: reqwest::Client::builder()
                .pool_idle_timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
            tg,
        }
    }

    pub(crate) async fn chat(&self, model: &str) -> reqwest::Response {
        self.client
            .post(format!("{}/v1/chat/completions", self.base))
            .json(&serde_json::json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap()
    }

    pub(crate) fn state(&self, machine: &str) -> String {
        let lab = self.svc.fleet();
        lab.machines
            .phase(lab.registry.machine_index(machine).unwrap())
            .as_str()
            .to_string()
    }

    /// Three refused requests open gpu-box; each is still served by ubuntu-box.
    pub(crate) async fn trip_gpu(&self) {
        self.gpu.set(Fault::Refuse);
        for _ in 0..3 {
            assert_eq!(self.chat("code").await.status(), 200);
        }
        assert_eq!(self.state("gpu-box"), "open");
    }
}

pub(crate) fn assert_bot_api_post(p: &fake::Post) {
    assert_eq!(p.bot, format!("bot{TOKEN}"));
    assert_eq!(p.method, "SendMessage");
    assert_eq!(p.chat_id, CHAT);
    assert_eq!(p.parse_mode.as_deref(), Some("HTML"));
}

pub(crate) fn seed_last_digest(dir: &std::path::Path, at: Timestamp) {
    let (store, _) = Store::open(dir).unwrap();
    store
        .sender()
        .send(Msg::Meta {
            key: LAST_DIGEST.into(),
            value: at.as_millisecond().to_string(),
        })
        .unwrap();
    assert!(store.flush(Duration::from_secs(5)));
}
