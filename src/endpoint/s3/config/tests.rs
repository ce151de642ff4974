use std::collections::HashMap;

use super::*;

/// An environment and files of a test's own.
#[derive(Default)]
struct Fake {
    vars: HashMap<&'static str, &'static str>,
    files: HashMap<PathBuf, &'static str>,
}

impl Fake {
    fn var(mut self, name: &'static str, value: &'static str) -> Self {
        self.vars.insert(name, value);
        self
    }
    fn file(mut self, path: &str, text: &'static str) -> Self {
        self.files.insert(PathBuf::from(path), text);
        self
    }
    fn home() -> Self {
        Fake::default().var("HOME", "/home/u")
    }
}

impl Sources for Fake {
    fn var(&self, name: &str) -> Option<String> {
        self.vars
            .get(name)
            .filter(|v| !v.is_empty())
            .map(|v| v.to_string())
    }
    fn read(&self, path: &Path) -> Option<String> {
        self.files.get(path).map(|t| t.to_string())
    }
}

const CREDENTIALS: &str = "\
[default]
aws_access_key_id = AKIDDEFAULT
aws_secret_access_key = default-secret

# a comment
[dev]
aws_access_key_id=AKIDDEV
aws_secret_access_key=dev-secret
aws_session_token = dev-token
";

const CONFIG: &str = "\
[default]
region = eu-west-1

[profile dev]
region = eu-central-1
endpoint_url = http://127.0.0.1:9000
s3 =
    addressing_style = virtual

[profile sso]
sso_session = corp
sso_account_id = 1
";

#[test]
fn environment_keys_come_first_and_profiles_give_region_and_endpoint() {
    let fake = Fake::home()
        .var("AWS_ACCESS_KEY_ID", "AKIDENV")
        .var("AWS_SECRET_ACCESS_KEY", "env-secret")
        .var("AWS_SESSION_TOKEN", "env-token")
        .var("AWS_PROFILE", "dev")
        .file("/home/u/.aws/credentials", CREDENTIALS)
        .file("/home/u/.aws/config", CONFIG);
    let s = resolve(&fake, None).unwrap();
    let c = s.credentials.unwrap();
    assert_eq!(c.access_key_id, "AKIDENV");
    assert_eq!(c.secret_access_key(), "env-secret");
    assert_eq!(c.session_token(), Some("env-token"));
    assert!(c.source.contains("AWS_ACCESS_KEY_ID"));
    assert_eq!(s.region, "eu-central-1");
    assert_eq!(s.service.host, "127.0.0.1");
    assert_eq!(s.service.port, 9000);
    assert!(!s.service.https);
    assert_eq!(s.service.addressing, Addressing::Virtual);
}

#[test]
fn a_profile_in_the_credentials_file_and_the_default_one() {
    let fake = Fake::home()
        .var("AWS_PROFILE", "dev")
        .file("/home/u/.aws/credentials", CREDENTIALS);
    let c = resolve(&fake, None).unwrap().credentials.unwrap();
    assert_eq!(
        (
            c.access_key_id.as_str(),
            c.secret_access_key(),
            c.session_token()
        ),
        ("AKIDDEV", "dev-secret", Some("dev-token"))
    );
    assert_eq!(c.source, "profile 'dev' in /home/u/.aws/credentials");

    let fake = Fake::home()
        .file("/home/u/.aws/credentials", CREDENTIALS)
        .file("/home/u/.aws/config", CONFIG);
    let s = resolve(&fake, None).unwrap();
    assert_eq!(s.credentials.unwrap().access_key_id, "AKIDDEFAULT");
    assert_eq!(s.region, "eu-west-1");
    assert_eq!(s.service.host, "s3.eu-west-1.amazonaws.com");
    assert!(s.service.https && !s.service.custom);
}

#[test]
fn keys_in_the_config_file_and_files_named_by_the_environment() {
    let fake = Fake::default()
        .var("AWS_CONFIG_FILE", "/etc/aws.conf")
        .var("AWS_PROFILE", "ci")
        .file(
            "/etc/aws.conf",
            "[profile ci]\naws_access_key_id = AKIDCI\naws_secret_access_key = ci\n",
        );
    let c = resolve(&fake, None).unwrap().credentials.unwrap();
    assert_eq!(c.access_key_id, "AKIDCI");
    assert_eq!(c.source, "profile 'ci' in /etc/aws.conf");
}

#[test]
fn nothing_found_is_anonymous_in_us_east_1() {
    let s = resolve(&Fake::home(), None).unwrap();
    assert_eq!(s.credentials, None);
    assert_eq!(s.region, "us-east-1");
    // Half a pair in the environment is not a pair.
    let fake = Fake::home().var("AWS_ACCESS_KEY_ID", "AKID");
    assert_eq!(resolve(&fake, None).unwrap().credentials, None);
}

#[test]
fn a_missing_named_profile_and_an_sso_profile_are_errors_in_words() {
    let fake = Fake::home().var("AWS_PROFILE", "nope");
    let e = resolve(&fake, None).unwrap_err();
    assert!(
        e.contains("'nope'") && e.contains("/home/u/.aws/credentials"),
        "{e}"
    );

    let fake = Fake::home()
        .var("AWS_PROFILE", "sso")
        .file("/home/u/.aws/config", CONFIG);
    let e = resolve(&fake, None).unwrap_err();
    assert!(
        e.contains("sso_session") && e.contains("export-credentials"),
        "{e}"
    );
}

#[test]
fn region_and_endpoint_precedence() {
    let fake = Fake::home()
        .var("AWS_DEFAULT_REGION", "ap-south-1")
        .var("AWS_ENDPOINT_URL", "http://[::1]:7000/")
        .file("/home/u/.aws/config", CONFIG);
    let s = resolve(&fake, None).unwrap();
    assert_eq!(s.region, "ap-south-1");
    assert_eq!((s.service.host.as_str(), s.service.port), ("[::1]", 7000));
    let fake = fake.var("AWS_REGION", "sa-east-1");
    let s = resolve(&fake, Some("https://s3.local:8443")).unwrap();
    assert_eq!(s.region, "sa-east-1");
    assert_eq!(
        (s.service.host.as_str(), s.service.port),
        ("s3.local", 8443)
    );
    assert!(s.service.https);
    let fake = fake.var("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true");
    assert!(!resolve(&fake, None).unwrap().service.custom);
}

#[test]
fn custom_endpoints_are_path_style_and_aws_is_virtual_hosted() {
    let custom = parse_endpoint("http://127.0.0.1:9000").unwrap();
    let t = custom.target("bkt", "dir/a b+c.txt");
    assert_eq!(t.host_header, "127.0.0.1:9000");
    assert_eq!(t.connect_host, "127.0.0.1");
    assert_eq!(t.path, "/bkt/dir/a%20b%2Bc.txt");
    assert_eq!(custom.target("bkt", "").path, "/bkt");

    let v6 = parse_endpoint("http://[::1]:80").unwrap();
    let t = v6.target("b", "k");
    assert_eq!(
        (t.host_header.as_str(), t.connect_host.as_str()),
        ("[::1]", "::1")
    );

    let aws = resolve(&Fake::home(), None).unwrap().service;
    let t = aws.target("my-bucket", "k");
    assert_eq!(t.host_header, "my-bucket.s3.us-east-1.amazonaws.com");
    assert_eq!(t.path, "/k");
    let t = aws.target("my.dotted.bucket", "k");
    assert_eq!(t.host_header, "s3.us-east-1.amazonaws.com");
    assert_eq!(t.path, "/my.dotted.bucket/k");
}

#[test]
fn malformed_endpoints_are_refused_in_words() {
    for (url, why) in [
        ("ftp://x", "not an http"),
        ("http://:80", "no host"),
        ("http://h:port", "not a number"),
        ("http://user:pw@h", "credentials"),
    ] {
        let e = parse_endpoint(url).unwrap_err();
        assert!(e.contains(why), "{url}: {e}");
    }
}

#[test]
fn secrets_print_as_stars() {
    let c = Credentials::new("AKID", "s3cr3t", Some("t0k3n".into()), "test");
    let shown = format!("{c:?}");
    assert!(
        !shown.contains("s3cr3t") && !shown.contains("t0k3n"),
        "{shown}"
    );
    assert!(shown.contains("***"));
}
