//! qmemo-fndsa-bench: FN-DSA verify speed from Pornin's `fn-dsa` crate, measured the
//! way bench_c measures liboqs, so `qmemo bench c` can put both in one table.
//!
//! Why it exists: the fast Falcon verifier of qMEMO is judged against the fastest
//! public verifier of the same lattice scheme. fn-dsa is that reference; it is FN-DSA
//! (FIPS 206 draft), not signature-compatible with liboqs Falcon-512 (round 3), so the
//! figures are a speed reference only.
//!
//! What it measures: one key pair, a ring of distinct messages (256 bytes each, MEMO's
//! transaction body) and their signatures; verify loops over the ring in batches timed
//! with a monotonic clock (`Instant`), for a fixed duration, in two modes:
//! - `decoded`: the verifying key decoded once (what a node with a key cache does);
//! - `encoded`: the key decoded on every verify (a verifier without a cache).
//! Every verdict is checked; a failed verify stops the program with exit status 1.
//!
//! Output: one JSON object on stdout. `--count N --mode M` runs exactly N verifies of
//! one mode and no timing, for instruction counting under callgrind.

use std::env;
use std::process::ExitCode;
use std::time::Instant;

use fn_dsa::{
    signature_size, sign_key_size, vrfy_key_size, CryptoRng, KeyPairGenerator, KeyPairGeneratorStandard,
    RngCore, RngError, SigningKey, SigningKeyStandard, VerifyingKey, VerifyingKeyStandard, DOMAIN_NONE,
    HASH_ID_RAW, SHAKE256,
};

/// A deterministic RNG (SHAKE256 over a fixed seed): keys and signatures are the same
/// on every run, so instruction counts are repeatable. Never used for real keys.
struct SeededRng(SHAKE256);

impl SeededRng {
    fn new(seed: &[u8]) -> Self {
        let mut shake = SHAKE256::new();
        shake.inject(b"qmemo-fndsa-bench seed");
        shake.inject(seed);
        shake.flip();
        SeededRng(shake)
    }
}

impl RngCore for SeededRng {
    fn next_u32(&mut self) -> u32 {
        let mut b = [0u8; 4];
        self.0.extract(&mut b);
        u32::from_le_bytes(b)
    }
    fn next_u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        self.0.extract(&mut b);
        u64::from_le_bytes(b)
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        self.0.extract(dest);
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), RngError> {
        self.0.extract(dest);
        Ok(())
    }
}

impl CryptoRng for SeededRng {}

struct Args {
    logn: u32,
    ring: usize,
    msg_bytes: usize,
    seconds: f64,
    batch: usize,
    count: Option<u64>,
    mode: Option<String>,
}

fn usage() -> String {
    "usage: qmemo-fndsa-bench [--logn 9|10] [--ring N] [--msg-bytes N] [--seconds S] [--batch N] \
     [--count N --mode decoded|encoded]"
        .to_string()
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args { logn: 9, ring: 64, msg_bytes: 256, seconds: 2.0, batch: 64, count: None, mode: None };
    let mut it = env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value; {}", usage()));
        match flag.as_str() {
            "--logn" => args.logn = value()?.parse().map_err(|_| "--logn takes 9 or 10".to_string())?,
            "--ring" => args.ring = value()?.parse().map_err(|_| "--ring takes a whole number".to_string())?,
            "--msg-bytes" => {
                args.msg_bytes = value()?.parse().map_err(|_| "--msg-bytes takes a whole number".to_string())?
            }
            "--seconds" => args.seconds = value()?.parse().map_err(|_| "--seconds takes a number".to_string())?,
            "--batch" => args.batch = value()?.parse().map_err(|_| "--batch takes a whole number".to_string())?,
            "--count" => args.count = Some(value()?.parse().map_err(|_| "--count takes a whole number".to_string())?),
            "--mode" => args.mode = Some(value()?),
            "-h" | "--help" => return Err(usage()),
            other => return Err(format!("unknown argument {other}; {}", usage())),
        }
    }
    if args.logn != 9 && args.logn != 10 {
        return Err("--logn takes 9 (FN-DSA-512) or 10 (FN-DSA-1024)".into());
    }
    if args.ring == 0 || args.batch == 0 || !(args.seconds > 0.0) {
        return Err("--ring, --batch and --seconds must be positive".into());
    }
    if let Some(mode) = &args.mode {
        if mode != "decoded" && mode != "encoded" {
            return Err("--mode takes decoded or encoded".into());
        }
    }
    if args.count.is_some() != args.mode.is_some() {
        return Err("--count and --mode go together".into());
    }
    Ok(args)
}

/// One key pair and `ring` signed messages.
struct Workload {
    vk: Vec<u8>,
    msgs: Vec<Vec<u8>>,
    sigs: Vec<Vec<u8>>,
}

fn workload(args: &Args) -> Workload {
    let mut rng = SeededRng::new(&[args.logn as u8]);
    let mut sk = vec![0u8; sign_key_size(args.logn)];
    let mut vk = vec![0u8; vrfy_key_size(args.logn)];
    KeyPairGeneratorStandard::default().keygen(args.logn, &mut rng, &mut sk, &mut vk);
    let mut signer = SigningKeyStandard::decode(&sk).expect("a key just generated decodes");
    let mut msgs = Vec::with_capacity(args.ring);
    let mut sigs = Vec::with_capacity(args.ring);
    for _ in 0..args.ring {
        let mut msg = vec![0u8; args.msg_bytes];
        rng.fill_bytes(&mut msg);
        let mut sig = vec![0u8; signature_size(args.logn)];
        signer.sign(&mut rng, &DOMAIN_NONE, &HASH_ID_RAW, &msg, &mut sig);
        msgs.push(msg);
        sigs.push(sig);
    }
    Workload { vk, msgs, sigs }
}

/// Verify ring item `i`; with `key` the pre-decoded key, else decode the key first.
#[inline(never)]
fn verify_one(w: &Workload, key: Option<&VerifyingKeyStandard>, i: usize) -> bool {
    match key {
        Some(vk) => vk.verify(&w.sigs[i], &DOMAIN_NONE, &HASH_ID_RAW, &w.msgs[i]),
        None => match VerifyingKeyStandard::decode(&w.vk) {
            Some(vk) => vk.verify(&w.sigs[i], &DOMAIN_NONE, &HASH_ID_RAW, &w.msgs[i]),
            None => false,
        },
    }
}

struct Measured {
    ops: u64,
    seconds: f64,
    batch_us: Vec<f64>,
}

fn measure(w: &Workload, key: Option<&VerifyingKeyStandard>, args: &Args) -> Result<Measured, String> {
    // Warm-up: one pass over the ring (caches, branch predictors, CPU frequency).
    for i in 0..w.msgs.len() {
        if !verify_one(w, key, i) {
            return Err(format!("warm-up verify of ring item {i} failed"));
        }
    }
    let mut batch_us = Vec::new();
    let mut ops = 0u64;
    let mut next = 0usize;
    let started = Instant::now();
    while started.elapsed().as_secs_f64() < args.seconds {
        let t0 = Instant::now();
        for _ in 0..args.batch {
            if !verify_one(w, key, next) {
                return Err(format!("verify of ring item {next} failed"));
            }
            next = (next + 1) % w.msgs.len();
        }
        batch_us.push(t0.elapsed().as_secs_f64() * 1e6 / args.batch as f64);
        ops += args.batch as u64;
    }
    Ok(Measured { ops, seconds: started.elapsed().as_secs_f64(), batch_us })
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.partial_cmp(b).expect("timings are finite"));
    let n = values.len();
    if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 }
}

fn mode_json(name: &str, m: &mut Measured) -> String {
    let us = median(&mut m.batch_us);
    format!(
        "{{\"mode\": \"{name}\", \"ops\": {}, \"seconds\": {:.6}, \"batches\": {}, \"median_us_per_op\": {:.4}, \
         \"median_ops_per_s\": {:.2}, \"mean_ops_per_s\": {:.2}}}",
        m.ops,
        m.seconds,
        m.batch_us.len(),
        us,
        1e6 / us,
        m.ops as f64 / m.seconds
    )
}

fn run() -> Result<(), String> {
    let args = parse_args()?;
    let w = workload(&args);
    let decoded = VerifyingKeyStandard::decode(&w.vk).ok_or("the generated verifying key does not decode")?;
    if let (Some(count), Some(mode)) = (args.count, &args.mode) {
        let key = if mode == "decoded" { Some(&decoded) } else { None };
        for n in 0..count {
            let i = (n % w.msgs.len() as u64) as usize;
            if !verify_one(&w, key, i) {
                return Err(format!("verify of ring item {i} failed"));
            }
        }
        println!("{{\"mode\": \"{mode}\", \"count\": {count}}}");
        return Ok(());
    }
    let mut with_key = measure(&w, Some(&decoded), &args)?;
    let mut without_key = measure(&w, None, &args)?;
    println!(
        "{{\"schema\": \"qmemo-fndsa-bench/1\", \"crate\": \"fn-dsa 0.4.0\", \"scheme\": \"FN-DSA-{}\", \
         \"signature_compatible_with_falcon_round3\": false, \"logn\": {}, \"ring\": {}, \"msg_bytes\": {}, \
         \"batch\": {}, \"modes\": [{}, {}]}}",
        if args.logn == 9 { 512 } else { 1024 },
        args.logn,
        args.ring,
        args.msg_bytes,
        args.batch,
        mode_json("decoded", &mut with_key),
        mode_json("encoded", &mut without_key)
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("qmemo-fndsa-bench: {message}");
            ExitCode::FAILURE
        }
    }
}
