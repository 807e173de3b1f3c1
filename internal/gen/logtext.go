package gen

import (
	"io"
	"strconv"
	"strings"
	"time"
)

// Console log lines. Each job renders its own pool from these templates once
// (so its logs repeat themselves like real build output does) and every
// emitted line then gets fresh timestamps, durations and ids, which keeps the
// zstd ratio in the 5–8× range real logs show instead of 50×.
var logTemplates = []string{
	"[INFO] Downloading from central: https://repo.maven.apache.org/maven2/{grp}/{art}/{ver}/{art}-{ver}.pom",
	"[INFO] Downloaded from central: https://repo.maven.apache.org/maven2/{grp}/{art}/{ver}/{art}-{ver}.jar ({kb} kB at {kb} kB/s)",
	"[INFO] --- maven-compiler-plugin:3.11.0:compile (default-compile) @ {art} ---",
	"[INFO] --- maven-surefire-plugin:3.2.5:test (default-test) @ {art} ---",
	"[INFO] Compiling {n} source files with javac [debug release 17] to target/classes",
	"[INFO] Tests run: {n}, Failures: 0, Errors: 0, Skipped: {s}, Time elapsed: {sec} s - in com.example.{pkg}.{cls}Test",
	"[INFO] Building jar: /home/jenkins/agent/workspace/{job}/target/{art}-{ver}.jar",
	"[WARNING] The POM for {grp}:{art}:jar:{ver} is missing, no dependency information available",
	"+ npm ci --no-audit --prefer-offline",
	"npm WARN deprecated {art}@{ver}: This package is no longer supported.",
	"added {N} packages, and audited {N} packages in {sec}s",
	"#{n} [build {s}/{n}] RUN apt-get update && apt-get install -y --no-install-recommends {art}",
	"#{n} sha256:{hex64} {kb}B / {kb}B {sec}s done",
	"#{n} DONE {sec}s",
	" > git rev-parse --resolve-git-dir /home/jenkins/agent/workspace/{job}/.git # timeout=10",
	" > git fetch --tags --force --progress -- https://git.example.com/{grp}.git +refs/heads/*:refs/remotes/origin/* # timeout=10",
	" > git checkout -f {hex40} # timeout=10",
	"Checking out Revision {hex40} (refs/remotes/origin/{branch})",
	"Commit message: \"{msg}\"",
	"> Task :{mod}:compileJava",
	"> Task :{mod}:processResources UP-TO-DATE",
	"> Task :{mod}:test",
	"{cls}Test > {method}() PASSED",
	"{cls}Test > {method}() SKIPPED",
	"    at com.example.{pkg}.{cls}.{method}({cls}.java:{N})",
	"    at java.base/java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1136)",
	"=== RUN   Test{cls}{method}",
	"--- PASS: Test{cls}{method} ({sec}s)",
	"ok  \tgit.example.com/{grp}/{pkg}\t{sec}s\tcoverage: {s}.{n}% of statements",
	"time=\"2024-01-01T00:00:00Z\" level=info msg=\"{msg}\" component={pkg} request_id={hex12}",
	"Step {s}/{n} : COPY {pkg}/ /app/{pkg}/",
	" ---> Running in {hex12}",
	"Successfully built {hex12}",
	"{art}: digest: sha256:{hex64} size: {N}",
	"Waiting for {pkg}-{hex12} to become ready ({s}/{n})",
	"Created Pod: kubernetes jenkins/{agent} ",
	"Agent {agent} is provisioned from template {pkg}",
	"Running on {agent} in /home/jenkins/agent/workspace/{job}",
	"Archiving artifacts",
	"Recording test results",
	"[Checks API] No suitable checks publisher found.",
	"Fingerprinting target/{art}-{ver}.jar",
	"  {file}  | {s}{n} +++++++----",
	"{kb}K .......... .......... .......... .......... .......... {s}% {kb}M 0s",
}

var pipelineSteps = []string{
	"[Pipeline] stage", "[Pipeline] { ({stage})", "[Pipeline] }", "[Pipeline] // stage",
	"[Pipeline] sh", "[Pipeline] echo", "[Pipeline] withCredentials", "[Pipeline] container",
	"[Pipeline] node", "[Pipeline] checkout", "[Pipeline] junit", "[Pipeline] archiveArtifacts",
	"[Pipeline] withEnv", "[Pipeline] timeout", "[Pipeline] parallel", "[Pipeline] { (Branch: {stage})",
}

var (
	wordsGroup  = []string{"org/apache/commons", "com/fasterxml/jackson/core", "io/netty", "org/springframework/boot", "com/google/guava", "org/slf4j", "io/micrometer", "org/junit/jupiter", "platform/backend", "team/payments"}
	wordsArt    = []string{"commons-lang3", "jackson-databind", "netty-handler", "spring-boot-starter-web", "guava", "slf4j-api", "micrometer-core", "junit-jupiter-api", "lodash", "react-dom", "typescript", "webpack", "libssl3", "ca-certificates", "curl", "billing-core", "ledger-api"}
	wordsPkg    = []string{"billing", "ledger", "auth", "catalog", "search", "gateway", "ingest", "reports", "checkout", "inventory", "notifier", "scheduler"}
	wordsCls    = []string{"InvoiceService", "LedgerRepository", "TokenValidator", "CatalogIndexer", "RetryPolicy", "PaymentGateway", "OrderMapper", "SessionStore", "RateLimiter", "EventPublisher"}
	wordsMethod = []string{"shouldRejectExpiredToken", "roundsHalfEven", "retriesOnConflict", "mapsNullFields", "publishesOnCommit", "handlesEmptyPage", "parsesIso8601", "keepsOrder", "evictsOldest"}
	wordsMsg    = []string{"Merge pull request #{N} from feature/{pkg}", "Bump {art} from {ver} to {ver}", "Fix flaky {cls}Test", "Refactor {pkg} module", "Release {ver}", "Add retries to {pkg} client", "Update Jenkinsfile"}
	wordsStage  = []string{"Checkout", "Build", "Unit tests", "Integration tests", "Static analysis", "Docker image", "Publish", "Deploy staging", "Smoke tests", "Deploy production"}
	wordsMod    = []string{"core", "api", "web", "cli", "common", "persistence", "integration-tests"}
)

// expand replaces {name} placeholders in t with values drawn from r; other
// braces (Pipeline's "{" lines) are kept.
func expand(t string, r *rng, job string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(t, '{')
		j := strings.IndexByte(t[i+1:], '}')
		if i < 0 || j < 0 {
			b.WriteString(t)
			return b.String()
		}
		name := t[i+1 : i+1+j]
		if !isIdent(name) {
			b.WriteString(t[:i+1])
			t = t[i+1:]
			continue
		}
		b.WriteString(t[:i])
		b.WriteString(placeholder(name, r, job))
		t = t[i+j+2:]
	}
}

func isIdent(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

func placeholder(name string, r *rng, job string) string {
	switch name {
	case "grp":
		return r.pick(wordsGroup)
	case "art":
		return r.pick(wordsArt)
	case "ver":
		return strconv.Itoa(r.between(0, 9)) + "." + strconv.Itoa(r.between(0, 30)) + "." + strconv.Itoa(r.between(0, 12))
	case "n":
		return strconv.Itoa(r.between(1, 99))
	case "s":
		return strconv.Itoa(r.between(0, 9))
	case "N":
		return strconv.Itoa(r.between(100, 99999))
	case "kb":
		return strconv.Itoa(r.between(1, 9999))
	case "sec":
		return strconv.Itoa(r.between(0, 120)) + "." + strconv.Itoa(r.between(100, 999))
	case "hex12":
		return r.hex(12)
	case "hex40":
		return r.hex(40)
	case "hex64":
		return r.hex(64)
	case "job":
		return job
	case "branch":
		return r.pick([]string{"main", "develop", "release/2.4", "feature/" + r.pick(wordsPkg)})
	case "pkg":
		return r.pick(wordsPkg)
	case "cls":
		return r.pick(wordsCls)
	case "method":
		return r.pick(wordsMethod)
	case "msg":
		return expand(r.pick(wordsMsg), r, job)
	case "stage":
		return r.pick(wordsStage)
	case "mod":
		return r.pick(wordsMod)
	case "agent":
		return r.pick(wordsPkg) + "-agent-" + r.alnum(5)
	case "file":
		return "src/main/java/com/example/" + r.pick(wordsPkg) + "/" + r.pick(wordsCls) + ".java"
	}
	return "{" + name + "}"
}

// logText emits console output for one job.
type logText struct {
	r        *rng
	pool     []string
	pipeline bool
	stamps   bool // timestamper plugin prefixes
	buf      []byte
	note     []byte
	sec      int64  // second of the cached stamp prefix
	prefix   []byte // "[2024-01-02T03:04:05"
}

func newLogText(r *rng, job string, pipeline bool) *logText {
	g := &logText{r: r, pipeline: pipeline, stamps: pipeline || r.chance(0.5),
		buf: make([]byte, 0, 72*kib), note: make([]byte, 96), sec: -1}
	for range 400 {
		g.pool = append(g.pool, expand(r.pick(logTemplates), r, job))
	}
	if pipeline {
		for range 60 {
			g.pool = append(g.pool, expand(r.pick(pipelineSteps), r, job))
		}
	}
	return g
}

// header returns the first lines Jenkins prints for a build.
func (g *logText) header(job string) string {
	cause := g.r.pick([]string{"Started by user admin", "Started by timer", "Started by an SCM change", "Branch indexing", "Started by upstream project \"release-train\" build number " + strconv.Itoa(g.r.between(1, 900))})
	s := cause + "\n"
	if g.pipeline {
		s += "[Pipeline] Start of Pipeline\n[Pipeline] podTemplate\n[Pipeline] {\n[Pipeline] node\n"
	} else {
		s += "Running as SYSTEM\nBuilding remotely on linux-agent-01 (linux docker) in workspace /home/jenkins/agent/workspace/" + job + "\n"
	}
	return s
}

// write emits about size bytes of log lines starting at start, ending with
// tail (e.g. "Finished: SUCCESS\n"), and returns the bytes written.
func (g *logText) write(w io.Writer, size int64, start time.Time, head, tail string) (int64, error) {
	var total int64
	ms := start.UnixMilli()
	g.buf = append(g.buf[:0], head...)
	stop := size - int64(len(tail))
	for total+int64(len(g.buf)) < stop {
		u := g.r.Uint64()
		ms += int64(u>>56) * 4
		if g.stamps {
			g.stamp(ms)
		}
		if g.pipeline && (u>>40)&31 == 0 {
			g.consoleNote()
		}
		g.buf = append(g.buf, g.pool[(u&0xffff)%uint64(len(g.pool))]...)
		g.entropy(u)
		g.buf = append(g.buf, '\n')
		if len(g.buf) >= 64*kib {
			n, err := w.Write(g.buf)
			total += int64(n)
			if err != nil {
				return total, err
			}
			g.buf = g.buf[:0]
		}
	}
	g.buf = append(g.buf, tail...)
	n, err := w.Write(g.buf)
	g.buf = g.buf[:0]
	return total + int64(n), err
}

// stamp appends a timestamper prefix, formatting the date only when the
// second changes.
func (g *logText) stamp(ms int64) {
	if s := ms / 1000; s != g.sec {
		g.sec = s
		g.prefix = time.Unix(s, 0).UTC().AppendFormat(g.prefix[:0], "[2006-01-02T15:04:05")
	}
	m := ms % 1000
	g.buf = append(g.buf, g.prefix...)
	g.buf = append(g.buf, '.', byte('0'+m/100), byte('0'+m/10%10), byte('0'+m%10), 'Z', ']', ' ')
}

// consoleNote appends a hidden ConsoleNote ("ha:////…" base64 blob) like the
// ones Pipeline writes before step lines; they are nearly incompressible.
func (g *logText) consoleNote() {
	n := 40 + g.r.IntN(len(g.note)-40)
	g.r.fill(g.note[:n])
	g.buf = append(g.buf, "\x1b[8mha:////4"...)
	g.buf = appendBase64(g.buf, g.note[:n])
	g.buf = append(g.buf, "\x1b[0m"...)
}

// entropy appends per-line variable data (durations, ids, counters).
func (g *logText) entropy(u uint64) {
	switch (u >> 16) & 7 {
	case 0, 1:
		g.buf = append(g.buf, " ("...)
		g.buf = strconv.AppendUint(g.buf, (u>>24)&0xffff, 10)
		g.buf = append(g.buf, " ms)"...)
	case 2:
		g.buf = append(g.buf, " id="...)
		v := g.r.Uint64()
		for i := range 12 {
			g.buf = append(g.buf, hexDigits[(v>>(4*i))&15])
		}
	case 3:
		g.buf = append(g.buf, " #"...)
		g.buf = strconv.AppendUint(g.buf, (u>>24)&0xfffff, 10)
	}
}

const b64chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

func appendBase64(dst, src []byte) []byte {
	for len(src) >= 3 {
		v := uint(src[0])<<16 | uint(src[1])<<8 | uint(src[2])
		dst = append(dst, b64chars[v>>18&63], b64chars[v>>12&63], b64chars[v>>6&63], b64chars[v&63])
		src = src[3:]
	}
	return dst
}
