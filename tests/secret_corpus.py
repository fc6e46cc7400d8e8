"""Credential shapes and benign look-alikes, generated at run time (docs/security.md).

Nothing here is a secret or looks like one in the source: every value is built from a seeded random
generator when a test asks for it, so scanning the repository finds nothing (K8).
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import random
import string
from collections.abc import Callable
from typing import Any

ALNUM = string.ascii_letters + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits
UPPER = string.ascii_uppercase
HEX = "0123456789abcdef"
URLSAFE = ALNUM + "_-"
PUNCT = "!@#%^&*"


class Gen:
    """Random bodies of the right alphabet and length."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def pick(self, alphabet: str, n: int) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(n))

    def digits(self, n: int) -> str:
        return str(self.rng.randint(1, 9)) + self.pick(string.digits, n - 1)

    def password(self, n: int = 15) -> str:
        """Mixed letters, digits and punctuation, with each class present."""
        body = self.pick(ALNUM + PUNCT, n - 3) + self.pick(UPPER, 1) + self.pick(string.digits, 1)
        return self.pick(string.ascii_lowercase, 1) + body + self.pick(PUNCT, 1)

    def url_password(self, n: int = 14) -> str:
        """A password as it appears inside a URL: sub-delimiters as they are, `@` and `#` percent-encoded."""
        return self.password(n).replace("%", "%25").replace("@", "%40").replace("#", "%23").replace("^", "%5E")

    def b64url(self, raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def raw(self, n: int) -> bytes:
        return bytes(self.rng.randrange(256) for _ in range(n))

    def pem(self, label: str, lines: int = 5) -> str:
        body = [base64.b64encode(self.raw(48)).decode() for _ in range(lines)]
        return "\n".join([f"-----BEGIN {label}-----", *body, f"-----END {label}-----"])


def _jwt(g: Gen) -> str:
    header = g.b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = g.b64url(json.dumps({"sub": g.digits(8), "name": "Ada", "iat": int(g.digits(10))}).encode())
    return f"{header}.{payload}.{g.b64url(g.raw(32))}"


def _service_account(g: Gen) -> str:
    return json.dumps(
        {
            "type": "service_account",
            "project_id": "billing-" + g.pick(LOWER_ALNUM, 6),
            "private_key_id": g.pick(HEX, 40),
            "private_key": g.pem("PRIVATE KEY", 8) + "\n",
            "client_email": "deployer@billing.iam.gserviceaccount.com",
            "client_id": g.digits(21),
        },
        indent=2,
    )


def _cookie(g: Gen) -> str:
    return "Cookie: sessionid=" + g.pick(LOWER_ALNUM, 32) + "; csrftoken=" + g.pick(ALNUM, 32)


def _env_file(g: Gen) -> str:
    return "\n".join(
        [
            "NODE_ENV=production",
            "PORT=8080",
            f"DATABASE_URL=postgres://app:{g.pick(ALNUM, 18)}@db.internal:5432/app",
            f"SECRET_KEY={g.pick(ALNUM + '-_', 50)}",
            "LOG_LEVEL=info",
        ]
    )


Shape = Callable[[Gen], str]

# name -> generator; the first 33 are the common shapes an agent is most likely to paste.
SHAPES: dict[str, Shape] = {
    "aws-access-key-id": lambda g: "AKIA" + g.pick(UPPER + "234567", 16),
    "aws-secret-access-key": lambda g: "aws_secret_access_key = " + g.pick(ALNUM + "/+", 40),
    "github-classic-pat": lambda g: "ghp_" + g.pick(ALNUM, 36),
    "github-oauth": lambda g: "gho_" + g.pick(ALNUM, 36),
    "github-app": lambda g: "ghs_" + g.pick(ALNUM, 36),
    "github-fine-grained": lambda g: "github_pat_" + g.pick(ALNUM, 22) + "_" + g.pick(ALNUM, 59),
    "gitlab-pat": lambda g: "glpat-" + g.pick(URLSAFE, 20),
    "slack-bot": lambda g: f"xoxb-{g.digits(11)}-{g.digits(13)}-{g.pick(ALNUM, 24)}",
    "slack-user": lambda g: f"xoxp-{g.digits(11)}-{g.digits(11)}-{g.digits(13)}-{g.pick(HEX, 32)}",
    "slack-webhook": lambda g: (
        "https://hooks.slack.com/services/T"
        + g.pick(UPPER + string.digits, 8)
        + "/B"
        + g.pick(UPPER + string.digits, 10)
        + "/"
        + g.pick(ALNUM, 24)
    ),
    "stripe-live": lambda g: "sk_live_" + g.pick(ALNUM, 24),
    "stripe-restricted": lambda g: "rk_live_" + g.pick(ALNUM, 24),
    "openai-legacy": lambda g: "sk-" + g.pick(ALNUM, 20) + "T3BlbkFJ" + g.pick(ALNUM, 20),
    "openai-project": lambda g: "sk-proj-" + g.pick(URLSAFE, 74) + "T3BlbkFJ" + g.pick(URLSAFE, 74),
    "anthropic": lambda g: "sk-ant-api03-" + g.pick(URLSAFE, 93) + "AA",
    "google-api-key": lambda g: "AIza" + g.pick(URLSAFE, 35),
    "npm-token": lambda g: "npm_" + g.pick(ALNUM, 36),
    "sendgrid": lambda g: "SG." + g.pick(URLSAFE, 22) + "." + g.pick(URLSAFE, 43),
    "twilio-api-key": lambda g: "SK" + g.pick(HEX, 32),
    "jwt": _jwt,
    "rsa-private-key": lambda g: g.pem("RSA PRIVATE KEY"),
    "openssh-private-key": lambda g: g.pem("OPENSSH PRIVATE KEY"),
    "ec-private-key": lambda g: g.pem("EC PRIVATE KEY", 3),
    "gcp-service-account": _service_account,
    "postgres-url": lambda g: f"postgres://app_user:{g.pick(ALNUM, 16)}@db.internal:5432/orders",
    "mysql-url": lambda g: f"mysql://root:{g.url_password()}@10.0.3.7/shop",
    "dotenv": _env_file,
    "password-assignment": lambda g: "password=" + g.password(),
    "authorization-bearer": lambda g: "Authorization: Bearer " + g.pick(ALNUM + "-._~", 40),
    "cookie-header": lambda g: _cookie(g),
    "x-api-key-header": lambda g: "x-api-key: " + g.pick(ALNUM, 40),
    "hivemem-client-token": lambda g: f"hm1.g{g.digits(2)}." + g.b64url(g.raw(32)),
    "hivemem-owner-key": lambda g: "hm1.owner." + g.b64url(g.raw(32)),
    # more formats for the placement matrix
    "github-user-to-server": lambda g: "ghu_" + g.pick(ALNUM, 36),
    "pypi-token": lambda g: "pypi-AgEIcHlwaS5vcmc" + g.pick(URLSAFE, 80),
    "pgp-private-key": lambda g: g.pem("PGP PRIVATE KEY BLOCK", 6),
    "pkcs8-private-key": lambda g: g.pem("PRIVATE KEY"),
    "encrypted-private-key": lambda g: g.pem("ENCRYPTED PRIVATE KEY"),
    "passwd-colon": lambda g: "passwd: " + g.password(),
    "pwd-assignment": lambda g: "pwd=" + g.password(12),
    "db-password-env": lambda g: "DB_PASSWORD=" + g.password(16),
    "authorization-basic": lambda g: (
        "Authorization: Basic " + base64.b64encode(f"deploy:{g.password(14)}".encode()).decode()
    ),
    "set-cookie-header": lambda g: f"Set-Cookie: session={g.pick(URLSAFE, 40)}; Path=/; HttpOnly; Secure",
    "phpsessid": lambda g: "PHPSESSID=" + g.pick(LOWER_ALNUM, 26),
    "jsessionid": lambda g: "JSESSIONID=" + g.pick("0123456789ABCDEF", 32),
    "connect-sid": lambda g: "connect.sid=s%3A" + g.pick(URLSAFE, 32) + "." + g.pick(ALNUM + "+/", 43),
    "mailchimp": lambda g: g.pick(HEX, 32) + "-us" + g.digits(2),
    "telegram-bot": lambda g: g.digits(9) + ":" + g.pick(URLSAFE, 35),
    "anthropic-admin": lambda g: "sk-ant-admin01-" + g.pick(URLSAFE, 93) + "AA",
    "discord-bot": lambda g: "M" + g.pick(ALNUM, 23) + "." + g.pick(URLSAFE, 6) + "." + g.pick(URLSAFE, 27),
    # the shapes an attacker stored in every field (issue: secrets coverage)
    "huggingface": lambda g: "hf_" + g.pick(string.ascii_letters, 34),
    "digitalocean": lambda g: "dop_v1_" + g.pick(HEX, 64),
    "shopify": lambda g: "shpat_" + g.pick(HEX, 32),
    "vault": lambda g: "hvs." + g.pick(URLSAFE, 91),
    "databricks": lambda g: "dapi" + g.pick(HEX, 32),
    "grafana-service-account": lambda g: "glsa_" + g.pick(ALNUM, 32) + "_" + g.pick(HEX, 8),
    "google-oauth-secret": lambda g: "GOCSPX-" + g.pick(URLSAFE, 28),
    "azure-ad-client-secret": lambda g: g.pick(ALNUM, 3) + g.digits(1) + "Q~" + g.pick(ALNUM + "_~.-", 34),
    "netrc": lambda g: f"machine api.example.com login deploy password {g.password()}",
    "docker-auths": lambda g: json.dumps(
        {"auths": {"registry.example.com": {"auth": base64.b64encode(f"deploy:{g.password()}".encode()).decode()}}}
    ),
    "age-secret-key": lambda g: "AGE-SECRET-KEY-1" + g.pick("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58),
}
ATTACKER = ("huggingface", "digitalocean", "shopify", "vault", "databricks", "grafana-service-account",
            "google-oauth-secret", "azure-ad-client-secret", "netrc", "docker-auths", "age-secret-key")  # fmt: skip
COMMON = tuple(list(SHAPES)[:33])

PLACEMENTS: dict[str, Callable[[str], str]] = {
    "bare": lambda s: s,
    "prose": lambda s: f"Note for later: the deploy job uses {s} and it works now.",
    "key=value": lambda s: f"deploy_value={s}",
    "json": lambda s: json.dumps({"service": "deploy", "value": s}),
}


def shapes(seed: int = 1, names: tuple[str, ...] | None = None) -> list[tuple[str, str]]:
    """(name, text) for each shape, from one seeded generator."""
    g = Gen(seed)
    return [(name, SHAPES[name](g)) for name in names or tuple(SHAPES)]


def placed(seed: int = 1) -> list[tuple[str, str, str]]:
    """(shape, placement, text): every shape in every placement."""
    return [(name, where, put(text)) for name, text in shapes(seed) for where, put in PLACEMENTS.items()]


def research_samples(seed: int = 7) -> list[tuple[str, str, bool]]:
    """The ten samples of the secret-detection trial: (name, text, is_secret); 6 secrets, 4 harmless.

    (The trial's extra bare AWS key id is a shape of its own, in prose among the placements.)
    """
    g = Gen(seed)
    key_id = "AKIA" + g.pick(UPPER + "234567", 16)
    return [
        ("aws key pair", f"aws_access_key_id = {key_id}\naws_secret_access_key = {g.pick(ALNUM + '/+', 40)}", True),
        ("github pat", "ghp_" + g.pick(ALNUM, 36), True),
        ("private key block", g.pem("RSA PRIVATE KEY"), True),
        ("password unquoted", "password=" + g.password(15), True),
        ("jwt", _jwt(g), True),
        ("cookie header", _cookie(g), True),
        ("key rotation", "rotate the API keys every 90 days", False),
        ("password policy", "password policy requires 12 characters", False),
        ("never paste", "never paste a private key or a session cookie", False),
        ("token bucket", "token bucket refills 10 tokens per second", False),
    ]


PROSE = (
    "rotate the API keys every 90 days",
    "password policy requires 12 characters",
    "never paste a private key or a session cookie",
    "token bucket refills 10 tokens per second",
    "The deploy key lives in the team vault; ask Sam for access.",
    "Use `gh auth login` instead of putting a token in the repo.",
    "Passwords are hashed with argon2id; never log them.",
    "The session cookie is HttpOnly and SameSite=Lax.",
    "We moved from API keys to OIDC tokens for CI in March.",
    "The secret scanner in CI runs on every push.",
    "Reset your password from the settings page, not the admin panel.",
    "Bearer tokens expire after one hour; refresh them with the refresh token.",
    "Store credentials in the OS keychain, not in .env files.",
    "The auth service validates JWTs with the public key from JWKS.",
    "AWS credentials come from the instance profile, never from env vars.",
    "GitHub tokens need the repo scope for private repositories.",
    "Slack webhooks are configured per channel in the integrations page.",
    "Stripe test mode uses keys that start with a test prefix.",
    "Set-Cookie headers must carry the Secure flag in production.",
    "The Authorization header is stripped by the proxy for health checks.",
    "Cookie consent banner text was updated for the EU release.",
    "Keep the private key out of the Docker image; mount it at run time.",
    "session ids are rotated on login to prevent fixation",
    "The password reset link is valid for 30 minutes.",
    "x-api-key is required for the partner endpoints only.",
    "Use a per-service API key so revocation is cheap.",
    "The token endpoint is /oauth/token and takes client credentials.",
    "We store only the SHA-256 of each API key, like hivemem does.",
    "Database passwords are injected by the secrets operator.",
    "Prefer short-lived credentials over long-lived access keys.",
    "The login form rate-limits password attempts to 5 per minute.",
    "Secret rotation runs nightly at 02:00 UTC.",
    "If a key leaks, revoke it first and then rotate dependents.",
    "The CSRF token is sent in a header, not a cookie.",
    "Basic auth is disabled on every public endpoint.",
    "The API key header name is configurable per tenant.",
    "Never commit kubeconfig files; they contain cluster credentials.",
    "Tokens are scoped per repository and expire after 30 days.",
    "The password field in the users table is called password_hash.",
    "Use `secrets.token_urlsafe(32)` to make a new session secret.",
    "The JWT library pins the algorithm to RS256.",
    "Two-factor codes are six digits and valid for 30 seconds.",
    "Ask the on-call engineer before rotating the signing key.",
    "The auth cookie name changed from sid to __Host-session.",
    "Our .env.example lists every variable with an empty value.",
    "The private registry needs a token in ~/.npmrc for installs.",
    "Service accounts get keys only through workload identity.",
    "Password managers autofill the login form if the field names are standard.",
    "The webhook secret is used to sign payloads with HMAC-SHA256.",
    "Access tokens are opaque to clients; only the gateway decodes them.",
    "Session timeout is 15 minutes of inactivity.",
    "Credential stuffing attempts spiked after the breach news.",
    "The SSH key for deploys is ed25519, created per environment.",
    "Turn off basic auth once SSO is live.",
    "The keyring backend on Linux is the secret service API.",
    "Key pairs for the VPN are generated on the device.",
    "The API returns 401 when the bearer token is missing.",
    "Cookies larger than 4 KB are silently dropped by browsers.",
    "Put the password in a file and pass --password-file instead of a flag.",
    "Auth flows: device code for CLIs, PKCE for browsers.",
)

IDENTIFIERS = (
    "password_hash = bcrypt.hashpw(password, salt)",
    "token_ttl = 3600",
    "session_timeout_minutes = 15",
    "api_key_header = 'X-API-Key'",
    "if user.password_reset_required: redirect('/reset')",
    "auth_mode = oauth",
    "SESSION_COOKIE_SECURE = True",
    "PASSWORD_MIN_LENGTH = 12",
    "def verify_token(token: str) -> Claims:",
    "secret_name = os.environ['SECRET_NAME']",
    "password = getpass.getpass()",
    "api_key = settings.API_KEY",
    "token = request.headers.get('Authorization')",
    "client_secret = config.get('oauth', 'client_secret')",
    "db_password = read_secret('db/password')",
    "password: ${DB_PASSWORD}",
    "api_key: {{ vault_api_key }}",
    "secret: <your-secret-here>",
    "auth_token_expiry_seconds = 900",
    "class PasswordResetForm(forms.Form):",
    "SELECT id, password_hash FROM users WHERE email = ?",
    "the column `api_key_prefix` keeps the first 8 characters for display",
    "export AWS_PROFILE=staging",
    "GITHUB_TOKEN is provided by Actions as ${{ secrets.GITHUB_TOKEN }}",
    "cookie_max_age = 86400",
    "session_store = 'redis'",
    "passwordless login uses magic links",
    "tokenizer = 'porter unicode61 remove_diacritics 2'",
    "keyboard shortcuts: ctrl-k opens the palette",
    "authorship is recorded per revision",
    "curl -H 'Authorization: Bearer $GITHUB_TOKEN' https://api.github.com/user",
    "Authorization: Bearer <token>",
    "Authorization: Bearer ${{ secrets.DEPLOY_TOKEN }}",
    "Cookie: theme=dark; lang=en-US",
    "Set-Cookie: consent=yes; Path=/; Max-Age=31536000",
    "x-api-key: <your key>",
    "PHPSESSID=deleted; expires=Thu, 01 Jan 1970 00:00:00 GMT",
    "session_id=42",
    "password=",
    "token: null",
)

URLS = (
    "https://github.com/org/repo/pull/1234",
    "https://docs.python.org/3/library/secrets.html",
    "https://example.com/callback?code=returned_by_idp&state=xyz",
    "http://localhost:8080/api/v1/sessions",
    "postgres://db.internal:5432/orders",
    "https://user@example.com/path",
    "git@github.com:org/repo.git",
    "ssh://git@host.example.org:2222/srv/repo.git",
    "https://registry.example.org/@scope%2fpkg",
    "https://auth.example.com/.well-known/openid-configuration",
    "s3://bucket-name/backups/2026-11-09/store.db.bak",
    "https://hooks.example.com/services/incoming",
    "https://api.example.com/v2/tokens?limit=50&page=2",
    "redis://cache.internal:6379/0",
    "https://console.cloud.google.com/iam-admin/serviceaccounts",
    "file:///home/ada/projects/api/README.md",
    "https://en.wikipedia.org/wiki/JSON_Web_Token",
    "https://example.com/login?next=/settings/password",
    "mongodb://mongo-0.mongo,mongo-1.mongo/?replicaSet=rs0",
    "https://cdn.example.com/assets/app.3f9c2a1b.js",
)


def _ulid(g: Gen) -> str:
    return g.pick("0123456789ABCDEFGHJKMNPQRSTVWXYZ", 26)


def _uuid(g: Gen) -> str:
    h = g.pick(HEX, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"


DIGEST_TEMPLATES = (
    "{}",
    "the auth service commit {} fixed token refresh",
    "session id for the bug report is {}",
    "secret rotation job run {} finished",
    "fixed in {} (token refresh)",
    "cookie consent id: {}",
    "password reset request {} expired",
    "See build {} for the api key migration.",
)

DIGESTS: dict[str, Shape] = {
    "git-sha": lambda g: g.pick(HEX, 40),
    "short-sha": lambda g: g.pick(HEX, 12),
    "sha256": lambda g: g.pick(HEX, 64),
    "uuid": _uuid,
    "ulid": _ulid,
    "docker-digest": lambda g: "ghcr.io/org/api@sha256:" + g.pick(HEX, 64),
    "npm-integrity": lambda g: "sha512-" + base64.b64encode(g.raw(64)).decode(),
    "sri-sha384": lambda g: "sha384-" + base64.b64encode(g.raw(48)).decode(),
}
HASHLIKE = tuple(DIGESTS)


def benign(seed: int = 11) -> list[tuple[str, str]]:
    """(category, text): ordinary developer-memory text that mentions keys, passwords, hashes and ids."""
    g = Gen(seed)
    out = [("prose", s) for s in PROSE] + [("identifier", s) for s in IDENTIFIERS] + [("url", s) for s in URLS]
    for category, make in DIGESTS.items():
        out += [(category, template.format(make(g))) for _ in range(3) for template in DIGEST_TEMPLATES]
    out += [("multiline", "\n".join(s for _, s in out[i : i + 5])) for i in range(0, 100, 5)]
    return out


GITLEAKS_SAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "gitleaks_samples.json.gz")


def gitleaks_samples() -> dict[str, Any]:
    """gitleaks' own literal samples per rule ({"rules": {id: {"tp": [...], "fp": [...]}}, "source", "license"}),
    written by scripts/update_gitleaks_rules.py from a gitleaks checkout (MIT; the notice is in the file)."""
    with gzip.open(GITLEAKS_SAMPLES, "rt", encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data


# The five lines of config prose the keyword plugin refused (issue: secrets coverage), and more of their kind.
BENIGN_SETTINGS = (
    "password_min_length = 12 characters",
    "PASSWORD_RESET_TIMEOUT = 3600 # one hour",
    "password: 8 chars minimum",
    "password_hash_rounds = 12 rounds",
    "secret_rotation_days = 90 days",
)
# Real-looking config, code comments and docs lines with no credential in them (K3 of the secrets research).
BENIGN_LINES = (
    *BENIGN_SETTINGS,
    "PASSWORD_MIN_LENGTH=12",
    "password_max_age_days = 90",
    "token_ttl_seconds = 900",
    "session_timeout = 30m",
    "SESSION_COOKIE_AGE = 1209600  # two weeks, in seconds",
    "SESSION_COOKIE_SECURE = True",
    "SESSION_COOKIE_HTTPONLY = true",
    "CSRF_COOKIE_NAME = 'csrftoken'",
    "auth_method = oauth2",
    "auth: none",
    "authentication: ldap",
    "secret_backend = vault",
    "secrets_path = /etc/app/secrets.d",
    "api_version = 2024-06-01",
    "api_key_header = X-Api-Key",
    "api_key_prefix = sk_",
    "token_type: bearer",
    "token_endpoint: https://auth.example.com/oauth/token",
    "jwks_uri: https://auth.example.com/.well-known/jwks.json",
    "issuer: https://auth.example.com/",
    "password_policy: strong",
    "password_reset_url = /accounts/password/reset/",
    "password_history = 5",
    "max_login_attempts = 5",
    "lockout_minutes = 15",
    "access_token_lifetime = 3600",
    "refresh_token_lifetime: 30d",
    "secret_name: app-db-credentials",
    "secretName: tls-cert",
    "secretKeyRef:",
    "  key: password",
    "  name: postgres-credentials",
    "valueFrom:",
    "DB_HOST=db.internal",
    "DB_PORT=5432",
    "DB_NAME=orders",
    "DB_USER=app",
    "DB_PASSWORD=${DB_PASSWORD}",
    "API_KEY=${API_KEY}",
    'password = os.environ["DB_PASSWORD"]',
    "api_key = settings.OPENAI_API_KEY",
    "token = request.headers.get('Authorization')",
    "secret = get_secret('prod/app/db')",
    "password = getpass.getpass()",
    "password: str",
    "api_key: Optional[str] = None",
    "def check_password(password: str, hashed: bytes) -> bool:",
    "if not verify_token(token):",
    "    raise AuthError('invalid token')",
    "# rotate the signing key every 90 days",
    "# TODO: move the api key to the secret manager",
    "# never log the password or the session cookie",
    "// the token expires after 15 minutes",
    "/* see docs/auth.md for how tokens are minted */",
    "-- passwords are hashed with argon2id",
    "<!-- the API key goes in the X-Api-Key header -->",
    "log_level = info",
    "workers = 4",
    "bind = 0.0.0.0:8000",
    "timeout = 30",
    "keepalive = 5",
    "max_requests = 1000",
    "retries: 3",
    "backoff: exponential",
    "region = eu-west-1",
    "bucket = app-assets-prod",
    "cache_ttl = 300",
    "feature_flags = checkout_v2,search_v3",
    "listen 443 ssl http2;",
    "ssl_protocols TLSv1.2 TLSv1.3;",
    "ssl_certificate /etc/nginx/certs/app.crt;",
    "ssl_certificate_key /etc/nginx/certs/app.key;",
    "proxy_set_header Authorization $http_authorization;",
    "proxy_set_header X-Real-IP $remote_addr;",
    "image: ghcr.io/acme/api:1.14.2",
    "replicas: 3",
    "memory: 512Mi",
    "cpu: 250m",
    "restartPolicy: Always",
    "[database]",
    "[auth]",
    "[tool.pytest.ini_options]",
    "testpaths = ['tests']",
    "The password must be at least 12 characters and contain a digit.",
    "Tokens are scoped to one workspace and expire after an hour.",
    "Rotate the API key if you think it leaked, then update the CI variable.",
    "Never paste a private key or a session cookie into a ticket.",
    "The secret manager holds the database password; the app reads it at start.",
    "Use a personal access token with read-only scope for the mirror job.",
    "Set the Authorization header to Bearer followed by the token from the login call.",
    "The cookie is HttpOnly and Secure, and its session id is never logged.",
    "Reset your password from the account page; the link is valid for 30 minutes.",
    "API keys start with a prefix so scanners can find them.",
    "passwords.txt is in .gitignore, and so is .env",
    "The token bucket refills 10 tokens per second.",
    "JWTs are signed with RS256; the public keys are at /.well-known/jwks.json.",
    "OAuth client id and secret come from the identity provider's console.",
    "The key rotation runbook is in ops/runbooks/rotate-keys.md.",
    "git log --oneline -5",
    "git rebase -i HEAD~3",
    "docker compose up -d db",
    "kubectl get secrets -n payments",
    "kubectl create secret generic db-creds --from-env-file=.env.prod",
    "vault kv get secret/app/db",
    "aws sts get-caller-identity",
    "gh auth login --with-token < token.txt",
    "npm config set //npm.example.com/:_authToken ${NPM_TOKEN}",
    "export GITHUB_TOKEN=$(gh auth token)",
    "curl -H 'Authorization: Bearer $TOKEN' https://api.example.com/v1/me",
    "psql postgres://app@db.internal:5432/orders",
    "ssh-keygen -t ed25519 -C 'ada@laptop'",
    "openssl rand -hex 32 > secret.key",
    "pip install --index-url https://pypi.example.com/simple/ app",
)
CONFIG_TEMPLATES = (
    "deploy {sha} to staging",
    "reverted {sha} (token refresh regression)",
    "request_id = {uuid}",
    "trace_id: {uuid}",
    "tenant: {uuid}",
    "checksum sha256: {sha256}",
    "digest = sha256:{sha256}",
    "Merged pull request for the password reset flow at {sha}.",
    "The session fix landed in {short}.",
    "  - id: {uuid}",
)


def benign_config(seed: int = 13) -> list[str]:
    """At least 300 lines of ordinary config, code, comments, docs, ids and hashes: none holds a credential."""
    g = Gen(seed)
    out = list(BENIGN_LINES)
    while len(out) < 320:
        template = CONFIG_TEMPLATES[len(out) % len(CONFIG_TEMPLATES)]
        out.append(template.format(sha=g.pick(HEX, 40), uuid=_uuid(g), sha256=g.pick(HEX, 64), short=g.pick(HEX, 7)))
    return out
