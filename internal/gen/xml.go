package gen

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// XML documents shaped like the ones Jenkins and its common plugins write.
// They only need to look real to a backup tool (sizes, structure, a
// <description> churn can edit); Jenkins is never started on them.

const xmlHead = "<?xml version='1.1' encoding='UTF-8'?>\n"

func esc(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "'", "&apos;", "\"", "&quot;")
	return r.Replace(s)
}

func millis(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

func rootConfigXML(r *rng, agents []agentPlan) string {
	var b strings.Builder
	b.WriteString(xmlHead + "<hudson>\n  <disabledAdministrativeMonitors>\n    <string>jenkins.security.QueueItemAuthenticatorMonitor</string>\n  </disabledAdministrativeMonitors>\n")
	b.WriteString("  <version>2.479.3</version>\n  <numExecutors>0</numExecutors>\n  <mode>EXCLUSIVE</mode>\n  <useSecurity>true</useSecurity>\n")
	b.WriteString("  <authorizationStrategy class=\"hudson.security.FullControlOnceLoggedInAuthorizationStrategy\">\n    <denyAnonymousReadAccess>true</denyAnonymousReadAccess>\n  </authorizationStrategy>\n")
	b.WriteString("  <securityRealm class=\"hudson.security.HudsonPrivateSecurityRealm\">\n    <disableSignup>true</disableSignup>\n    <enableCaptcha>false</enableCaptcha>\n  </securityRealm>\n")
	b.WriteString("  <disableRememberMe>false</disableRememberMe>\n  <projectNamingStrategy class=\"jenkins.model.ProjectNamingStrategy$DefaultProjectNamingStrategy\"/>\n")
	b.WriteString("  <workspaceDir>${JENKINS_HOME}/workspace/${ITEM_FULL_NAME}</workspaceDir>\n  <buildsDir>${ITEM_ROOTDIR}/builds</buildsDir>\n  <markupFormatter class=\"hudson.markup.EscapedMarkupFormatter\"/>\n  <jdks/>\n  <viewsTabBar class=\"hudson.views.DefaultViewsTabBar\"/>\n  <myViewsTabBar class=\"hudson.views.DefaultMyViewsTabBar\"/>\n")
	b.WriteString("  <clouds>\n    <org.csanchez.jenkins.plugins.kubernetes.KubernetesCloud plugin=\"kubernetes@4295.v7fa_01b_309c95\">\n      <name>kubernetes</name>\n      <templates>\n")
	for _, t := range []string{"maven", "node", "docker", "golang"} {
		fmt.Fprintf(&b, "        <org.csanchez.jenkins.plugins.kubernetes.PodTemplate>\n          <id>%s</id>\n          <name>%s</name>\n          <namespace>jenkins-agents</namespace>\n          <label>%s</label>\n          <containers>\n            <org.csanchez.jenkins.plugins.kubernetes.ContainerTemplate>\n              <name>%s</name>\n              <image>%s:latest</image>\n              <command>sleep</command>\n              <args>infinity</args>\n              <resourceRequestCpu>500m</resourceRequestCpu>\n              <resourceRequestMemory>1Gi</resourceRequestMemory>\n            </org.csanchez.jenkins.plugins.kubernetes.ContainerTemplate>\n          </containers>\n        </org.csanchez.jenkins.plugins.kubernetes.PodTemplate>\n", r.uuid(), t, t, t, t)
	}
	b.WriteString("      </templates>\n      <serverUrl>https://kubernetes.default</serverUrl>\n      <namespace>jenkins</namespace>\n      <jenkinsUrl>http://jenkins.jenkins.svc.cluster.local:8080</jenkinsUrl>\n      <jenkinsTunnel>jenkins-agent.jenkins.svc.cluster.local:50000</jenkinsTunnel>\n      <containerCap>50</containerCap>\n      <connectTimeout>5</connectTimeout>\n      <readTimeout>15</readTimeout>\n    </org.csanchez.jenkins.plugins.kubernetes.KubernetesCloud>\n  </clouds>\n")
	b.WriteString("  <quietPeriod>5</quietPeriod>\n  <scmCheckoutRetryCount>0</scmCheckoutRetryCount>\n  <views>\n    <hudson.model.AllView>\n      <owner class=\"hudson\" reference=\"../../..\"/>\n      <name>all</name>\n      <filterExecutors>false</filterExecutors>\n      <filterQueue>false</filterQueue>\n      <properties class=\"hudson.model.View$PropertyList\"/>\n    </hudson.model.AllView>\n  </views>\n")
	b.WriteString("  <primaryView>all</primaryView>\n  <slaveAgentPort>50000</slaveAgentPort>\n  <label></label>\n  <crumbIssuer class=\"hudson.security.csrf.DefaultCrumbIssuer\">\n    <excludeClientIPFromCrumb>false</excludeClientIPFromCrumb>\n  </crumbIssuer>\n  <nodeProperties/>\n  <globalNodeProperties/>\n  <nodeRenameMigrationNeeded>false</nodeRenameMigrationNeeded>\n</hudson>\n")
	return b.String()
}

// secretValue looks like a Secret Jenkins stored encrypted in XML.
func secretValue(r *rng) string { return "{AQAAABAAAAAQ" + r.b64(r.between(40, 90)) + "}" }

func credentialsXML(r *rng) string {
	var b strings.Builder
	b.WriteString(xmlHead + "<com.cloudbees.plugins.credentials.SystemCredentialsProvider plugin=\"credentials@1371.vfee6b_095f0a_3\">\n  <domainCredentialsMap class=\"hudson.util.CopyOnWriteMap$Hash\">\n    <entry>\n      <com.cloudbees.plugins.credentials.domains.Domain>\n        <specifications/>\n      </com.cloudbees.plugins.credentials.domains.Domain>\n      <java.util.concurrent.CopyOnWriteArrayList>\n")
	for i := range r.between(4, 12) {
		switch i % 3 {
		case 0:
			fmt.Fprintf(&b, "        <com.cloudbees.plugins.credentials.impl.UsernamePasswordCredentialsImpl>\n          <scope>GLOBAL</scope>\n          <id>git-%s</id>\n          <description>Git access %d</description>\n          <username>ci-bot</username>\n          <password>%s</password>\n          <usernameSecret>false</usernameSecret>\n        </com.cloudbees.plugins.credentials.impl.UsernamePasswordCredentialsImpl>\n", r.alnum(6), i, secretValue(r))
		case 1:
			fmt.Fprintf(&b, "        <com.cloudbees.jenkins.plugins.sshcredentials.impl.BasicSSHUserPrivateKey plugin=\"ssh-credentials@343.v884f71d78167\">\n          <scope>GLOBAL</scope>\n          <id>ssh-agent-%s</id>\n          <description></description>\n          <username>jenkins</username>\n          <privateKeySource class=\"com.cloudbees.jenkins.plugins.sshcredentials.impl.BasicSSHUserPrivateKey$DirectEntryPrivateKeySource\">\n            <privateKey>{AQAAABAAAAoQ%s}</privateKey>\n          </privateKeySource>\n        </com.cloudbees.jenkins.plugins.sshcredentials.impl.BasicSSHUserPrivateKey>\n", r.alnum(6), r.b64(r.between(1600, 2600)))
		default:
			fmt.Fprintf(&b, "        <org.jenkinsci.plugins.plaincredentials.impl.StringCredentialsImpl plugin=\"plain-credentials@183.va_de8f1dd5a_2b_\">\n          <scope>GLOBAL</scope>\n          <id>token-%s</id>\n          <description>API token</description>\n          <secret>%s</secret>\n        </org.jenkinsci.plugins.plaincredentials.impl.StringCredentialsImpl>\n", r.alnum(6), secretValue(r))
		}
	}
	b.WriteString("      </java.util.concurrent.CopyOnWriteArrayList>\n    </entry>\n  </domainCredentialsMap>\n</com.cloudbees.plugins.credentials.SystemCredentialsProvider>")
	return b.String()
}

func queueXML(r *rng) string {
	return xmlHead + "<hudson.model.Queue_-State>\n  <counter>" + strconv.Itoa(r.between(1000, 900000)) + "</counter>\n  <items/>\n</hudson.model.Queue_-State>"
}

const updateCenterXML = xmlHead + `<sites>
  <site>
    <id>default</id>
    <url>https://updates.jenkins.io/update-center.json</url>
  </site>
</sites>`

const nodeMonitorsXML = xmlHead + `<hudson.model.ComputerSet_-DescriptorImpl>
  <monitors>
    <hudson.node__monitors.ArchitectureMonitor/>
    <hudson.node__monitors.ClockMonitor/>
    <hudson.node__monitors.DiskSpaceMonitor>
      <freeSpaceThreshold>1GiB</freeSpaceThreshold>
      <freeSpaceWarningThreshold>2GiB</freeSpaceWarningThreshold>
    </hudson.node__monitors.DiskSpaceMonitor>
    <hudson.node__monitors.SwapSpaceMonitor/>
    <hudson.node__monitors.TemporarySpaceMonitor>
      <freeSpaceThreshold>1GiB</freeSpaceThreshold>
      <freeSpaceWarningThreshold>2GiB</freeSpaceWarningThreshold>
    </hudson.node__monitors.TemporarySpaceMonitor>
    <hudson.node__monitors.ResponseTimeMonitor/>
  </monitors>
</hudson.model.ComputerSet_-DescriptorImpl>`

func correlatorXML(r *rng) string {
	return xmlHead + "<jenkins.telemetry.Correlator>\n  <correlationId>" + r.uuid() + "</correlationId>\n</jenkins.telemetry.Correlator>"
}

const locationXML = xmlHead + `<jenkins.model.JenkinsLocationConfiguration>
  <adminAddress>jenkins-admin@example.com</adminAddress>
  <jenkinsUrl>https://jenkins.example.com/</jenkinsUrl>
</jenkins.model.JenkinsLocationConfiguration>`

const gitToolXML = xmlHead + `<hudson.plugins.git.GitTool_-DescriptorImpl plugin="git-client@6.1.0">
  <installations class="hudson.plugins.git.GitTool-array">
    <hudson.plugins.git.GitTool>
      <name>Default</name>
      <home>git</home>
      <properties/>
    </hudson.plugins.git.GitTool>
  </installations>
</hudson.plugins.git.GitTool_-DescriptorImpl>`

func nodeXML(a agentPlan, r *rng) string {
	switch a.kind {
	case agentSSH:
		return xmlHead + "<slave>\n  <name>" + esc(a.name) + "</name>\n  <description>Build VM</description>\n  <remoteFS>/home/jenkins</remoteFS>\n  <numExecutors>" + strconv.Itoa(r.between(1, 8)) + "</numExecutors>\n  <mode>NORMAL</mode>\n  <retentionStrategy class=\"hudson.slaves.RetentionStrategy$Always\"/>\n" +
			"  <launcher class=\"hudson.plugins.sshslaves.SSHLauncher\" plugin=\"ssh-slaves@3.1031.v72c6b_883b_869\">\n    <host>" + a.name + ".build.example.com</host>\n    <port>22</port>\n    <credentialsId>ssh-agent-key</credentialsId>\n    <launchTimeoutSeconds>60</launchTimeoutSeconds>\n    <maxNumRetries>10</maxNumRetries>\n    <retryWaitTime>15</retryWaitTime>\n    <sshHostKeyVerificationStrategy class=\"hudson.plugins.sshslaves.verifiers.KnownHostsFileKeyVerificationStrategy\"/>\n    <tcpNoDelay>true</tcpNoDelay>\n  </launcher>\n" +
			"  <label>linux vm</label>\n  <nodeProperties/>\n</slave>"
	case agentKubernetes:
		return xmlHead + "<org.csanchez.jenkins.plugins.kubernetes.KubernetesSlave plugin=\"kubernetes@4295.v7fa_01b_309c95\">\n  <name>" + esc(a.name) + "</name>\n  <description>Agent " + a.name + "</description>\n  <remoteFS>/home/jenkins/agent</remoteFS>\n  <numExecutors>1</numExecutors>\n  <mode>EXCLUSIVE</mode>\n  <retentionStrategy class=\"org.csanchez.jenkins.plugins.kubernetes.OnceRetentionStrategy\">\n    <idleMinutes>0</idleMinutes>\n  </retentionStrategy>\n" +
			"  <launcher class=\"org.csanchez.jenkins.plugins.kubernetes.KubernetesLauncher\">\n    <webSocket>false</webSocket>\n  </launcher>\n  <label>maven</label>\n  <nodeProperties/>\n  <podTemplateId>" + r.uuid() + "</podTemplateId>\n  <namespace>jenkins-agents</namespace>\n  <cloudName>kubernetes</cloudName>\n</org.csanchez.jenkins.plugins.kubernetes.KubernetesSlave>"
	}
	return xmlHead + "<slave>\n  <name>" + esc(a.name) + "</name>\n  <description>Inbound agent</description>\n  <remoteFS>/home/jenkins/agent</remoteFS>\n  <numExecutors>" + strconv.Itoa(r.between(1, 4)) + "</numExecutors>\n  <mode>NORMAL</mode>\n  <retentionStrategy class=\"hudson.slaves.RetentionStrategy$Always\"/>\n" +
		"  <launcher class=\"hudson.slaves.JNLPLauncher\">\n    <workDirSettings>\n      <disabled>false</disabled>\n      <internalDir>remoting</internalDir>\n      <failIfWorkDirIsMissing>false</failIfWorkDirIsMissing>\n    </workDirSettings>\n    <webSocket>" + strconv.FormatBool(r.chance(0.5)) + "</webSocket>\n  </launcher>\n" +
		"  <label>linux docker</label>\n  <nodeProperties/>\n</slave>"
}

func folderXML(name string, r *rng) string {
	return xmlHead + "<com.cloudbees.hudson.plugins.folder.Folder plugin=\"cloudbees-folder@6.955.v81e2a_35c08d3\">\n  <actions/>\n  <description>" + esc(name) + " jobs</description>\n  <properties/>\n  <folderViews class=\"com.cloudbees.hudson.plugins.folder.views.DefaultFolderViewHolder\">\n    <views>\n      <hudson.model.AllView>\n        <owner class=\"com.cloudbees.hudson.plugins.folder.Folder\" reference=\"../../../..\"/>\n        <name>All</name>\n        <filterExecutors>false</filterExecutors>\n        <filterQueue>false</filterQueue>\n        <properties class=\"hudson.model.View$PropertyList\"/>\n      </hudson.model.AllView>\n    </views>\n    <tabBar class=\"hudson.views.DefaultViewsTabBar\"/>\n  </folderViews>\n  <healthMetrics/>\n  <icon class=\"com.cloudbees.hudson.plugins.folder.icons.StockFolderIcon\"/>\n</com.cloudbees.hudson.plugins.folder.Folder>"
}

func multibranchXML(name string, r *rng) string {
	return xmlHead + "<org.jenkinsci.plugins.workflow.multibranch.WorkflowMultiBranchProject plugin=\"workflow-multibranch@795.ve0cb_1f45ca_9a_\">\n  <actions/>\n  <description>" + esc(name) + "</description>\n  <properties/>\n  <folderViews class=\"jenkins.branch.MultiBranchProjectViewHolder\" plugin=\"branch-api@2.1200.v4b_a_3da_2eb_db_4\">\n    <owner class=\"org.jenkinsci.plugins.workflow.multibranch.WorkflowMultiBranchProject\" reference=\"../..\"/>\n  </folderViews>\n" +
		"  <orphanedItemStrategy class=\"com.cloudbees.hudson.plugins.folder.computed.DefaultOrphanedItemStrategy\" plugin=\"cloudbees-folder@6.955.v81e2a_35c08d3\">\n    <pruneDeadBranches>true</pruneDeadBranches>\n    <daysToKeep>-1</daysToKeep>\n    <numToKeep>-1</numToKeep>\n  </orphanedItemStrategy>\n" +
		"  <triggers>\n    <com.cloudbees.hudson.plugins.folder.computed.PeriodicFolderTrigger plugin=\"cloudbees-folder@6.955.v81e2a_35c08d3\">\n      <spec>H H/4 * * *</spec>\n      <interval>86400000</interval>\n    </com.cloudbees.hudson.plugins.folder.computed.PeriodicFolderTrigger>\n  </triggers>\n" +
		"  <sources class=\"jenkins.branch.MultiBranchProject$BranchSourceList\" plugin=\"branch-api@2.1200.v4b_a_3da_2eb_db_4\">\n    <data>\n      <jenkins.branch.BranchSource>\n        <source class=\"jenkins.plugins.git.GitSCMSource\" plugin=\"git@5.6.0\">\n          <id>" + r.uuid() + "</id>\n          <remote>https://git.example.com/" + esc(name) + ".git</remote>\n          <credentialsId>git-ci</credentialsId>\n          <traits>\n            <jenkins.plugins.git.traits.BranchDiscoveryTrait/>\n          </traits>\n        </source>\n        <strategy class=\"jenkins.branch.DefaultBranchPropertyStrategy\">\n          <properties class=\"empty-list\"/>\n        </strategy>\n      </jenkins.branch.BranchSource>\n    </data>\n    <owner class=\"org.jenkinsci.plugins.workflow.multibranch.WorkflowMultiBranchProject\" reference=\"../..\"/>\n  </sources>\n" +
		"  <factory class=\"org.jenkinsci.plugins.workflow.multibranch.WorkflowBranchProjectFactory\">\n    <owner class=\"org.jenkinsci.plugins.workflow.multibranch.WorkflowMultiBranchProject\" reference=\"../..\"/>\n    <scriptPath>Jenkinsfile</scriptPath>\n  </factory>\n</org.jenkinsci.plugins.workflow.multibranch.WorkflowMultiBranchProject>"
}

func logRotator(r *rng) string {
	return "    <jenkins.model.BuildDiscarderProperty>\n      <strategy class=\"hudson.tasks.LogRotator\">\n        <daysToKeep>-1</daysToKeep>\n        <numToKeep>" + strconv.Itoa(r.between(10, 50)) + "</numToKeep>\n        <artifactDaysToKeep>-1</artifactDaysToKeep>\n        <artifactNumToKeep>5</artifactNumToKeep>\n      </strategy>\n    </jenkins.model.BuildDiscarderProperty>\n"
}

func freestyleXML(name string, r *rng) string {
	return xmlHead + "<project>\n  <actions/>\n  <description>Builds " + esc(name) + "</description>\n  <keepDependencies>false</keepDependencies>\n  <properties>\n" + logRotator(r) + "  </properties>\n" +
		"  <scm class=\"hudson.plugins.git.GitSCM\" plugin=\"git@5.6.0\">\n    <configVersion>2</configVersion>\n    <userRemoteConfigs>\n      <hudson.plugins.git.UserRemoteConfig>\n        <url>https://git.example.com/" + r.pick(wordsPkg) + ".git</url>\n        <credentialsId>git-ci</credentialsId>\n      </hudson.plugins.git.UserRemoteConfig>\n    </userRemoteConfigs>\n    <branches>\n      <hudson.plugins.git.BranchSpec>\n        <name>*/main</name>\n      </hudson.plugins.git.BranchSpec>\n    </branches>\n  </scm>\n" +
		"  <assignedNode>linux</assignedNode>\n  <canRoam>false</canRoam>\n  <disabled>false</disabled>\n  <blockBuildWhenDownstreamBuilding>false</blockBuildWhenDownstreamBuilding>\n  <blockBuildWhenUpstreamBuilding>false</blockBuildWhenUpstreamBuilding>\n  <triggers>\n    <hudson.triggers.SCMTrigger>\n      <spec>H/15 * * * *</spec>\n      <ignorePostCommitHooks>false</ignorePostCommitHooks>\n    </hudson.triggers.SCMTrigger>\n  </triggers>\n  <concurrentBuild>false</concurrentBuild>\n" +
		"  <builders>\n    <hudson.tasks.Shell>\n      <command>set -eu\n./mvnw -B -ntp clean verify -Dproject=" + esc(name) + "\n</command>\n      <configuredLocalRules/>\n    </hudson.tasks.Shell>\n  </builders>\n" +
		"  <publishers>\n    <hudson.tasks.ArtifactArchiver>\n      <artifacts>target/*.jar</artifacts>\n      <allowEmptyArchive>true</allowEmptyArchive>\n      <onlyIfSuccessful>false</onlyIfSuccessful>\n      <fingerprint>true</fingerprint>\n    </hudson.tasks.ArtifactArchiver>\n    <hudson.tasks.junit.JUnitResultArchiver plugin=\"junit@1300.v03d9d8a_cf1fb_\">\n      <testResults>target/surefire-reports/*.xml</testResults>\n    </hudson.tasks.junit.JUnitResultArchiver>\n  </publishers>\n  <buildWrappers/>\n</project>"
}

func pipelineXML(name string, r *rng) string {
	script := "pipeline {\n  agent { label 'maven' }\n  options { timestamps() }\n  stages {\n    stage('Build') { steps { sh './mvnw -B verify' } }\n    stage('Publish') { steps { archiveArtifacts 'target/*.jar' } }\n  }\n}\n"
	def := "  <definition class=\"org.jenkinsci.plugins.workflow.cps.CpsFlowDefinition\" plugin=\"workflow-cps@3996.va_f5c1799f978\">\n    <script>" + esc(script) + "</script>\n    <sandbox>true</sandbox>\n  </definition>\n"
	if r.chance(0.6) {
		def = "  <definition class=\"org.jenkinsci.plugins.workflow.cps.CpsScmFlowDefinition\" plugin=\"workflow-cps@3996.va_f5c1799f978\">\n    <scm class=\"hudson.plugins.git.GitSCM\" plugin=\"git@5.6.0\">\n      <configVersion>2</configVersion>\n      <userRemoteConfigs>\n        <hudson.plugins.git.UserRemoteConfig>\n          <url>https://git.example.com/" + r.pick(wordsPkg) + ".git</url>\n        </hudson.plugins.git.UserRemoteConfig>\n      </userRemoteConfigs>\n    </scm>\n    <scriptPath>Jenkinsfile</scriptPath>\n    <lightweight>true</lightweight>\n  </definition>\n"
	}
	return xmlHead + "<flow-definition plugin=\"workflow-job@1436.vfa_244484591f\">\n  <actions/>\n  <description>Pipeline for " + esc(name) + "</description>\n  <keepDependencies>false</keepDependencies>\n  <properties>\n" + logRotator(r) + "  </properties>\n" + def + "  <triggers/>\n  <disabled>false</disabled>\n</flow-definition>"
}

func branchXML(branch string, r *rng) string {
	return xmlHead + "<flow-definition plugin=\"workflow-job@1436.vfa_244484591f\">\n  <actions/>\n  <description></description>\n  <displayName>" + esc(branch) + "</displayName>\n  <properties>\n    <org.jenkinsci.plugins.workflow.multibranch.BranchJobProperty plugin=\"workflow-multibranch@795.ve0cb_1f45ca_9a_\">\n      <branch plugin=\"branch-api@2.1200.v4b_a_3da_2eb_db_4\">\n        <sourceId>" + r.uuid() + "</sourceId>\n        <head class=\"jenkins.plugins.git.GitBranchSCMHead\" plugin=\"git@5.6.0\">\n          <name>" + esc(branch) + "</name>\n        </head>\n        <scm class=\"hudson.plugins.git.GitSCM\" plugin=\"git@5.6.0\">\n          <configVersion>2</configVersion>\n        </scm>\n        <properties/>\n        <actions/>\n      </branch>\n    </org.jenkinsci.plugins.workflow.multibranch.BranchJobProperty>\n  </properties>\n" +
		"  <definition class=\"org.jenkinsci.plugins.workflow.multibranch.SCMBinder\" plugin=\"workflow-multibranch@795.ve0cb_1f45ca_9a_\">\n    <scriptPath>Jenkinsfile</scriptPath>\n  </definition>\n  <triggers/>\n  <disabled>false</disabled>\n</flow-definition>"
}

// buildXML is the build record Jenkins writes when a build completes (and
// while it runs, without <result>).
func buildXML(s buildSpec, r *rng) string {
	var b strings.Builder
	root := "build"
	if s.pipeline {
		root = "flow-build plugin=\"workflow-job@1436.vfa_244484591f\""
	}
	b.WriteString(xmlHead + "<" + root + ">\n  <actions>\n")
	fmt.Fprintf(&b, "    <hudson.model.CauseAction>\n      <causeBag class=\"linked-hash-map\">\n        <entry>\n          <hudson.model.Cause_-UserIdCause>\n            <userId>admin</userId>\n          </hudson.model.Cause_-UserIdCause>\n          <int>1</int>\n        </entry>\n      </causeBag>\n    </hudson.model.CauseAction>\n")
	fmt.Fprintf(&b, "    <hudson.plugins.git.util.BuildData plugin=\"git@5.6.0\">\n      <buildsByBranchName>\n        <entry>\n          <string>refs/remotes/origin/main</string>\n          <hudson.plugins.git.util.Build>\n            <marked plugin=\"git-client@6.1.0\">\n              <sha1>%s</sha1>\n            </marked>\n            <hudsonBuildNumber>%d</hudsonBuildNumber>\n          </hudson.plugins.git.util.Build>\n        </entry>\n      </buildsByBranchName>\n      <remoteUrls>\n        <string>https://git.example.com/%s.git</string>\n      </remoteUrls>\n    </hudson.plugins.git.util.BuildData>\n", r.hex(40), s.number, r.pick(wordsPkg))
	if s.junit {
		fmt.Fprintf(&b, "    <hudson.tasks.junit.TestResultAction plugin=\"junit@1300.v03d9d8a_cf1fb_\">\n      <failCount>%d</failCount>\n      <skipCount>%d</skipCount>\n      <totalCount>%d</totalCount>\n      <healthScaleFactor>1.0</healthScaleFactor>\n    </hudson.tasks.junit.TestResultAction>\n", r.between(0, 3), r.between(0, 9), r.between(50, 4000))
	}
	b.WriteString("  </actions>\n")
	fmt.Fprintf(&b, "  <queueId>%d</queueId>\n  <timestamp>%s</timestamp>\n  <startTime>%s</startTime>\n", r.between(1, 900000), millis(s.start), millis(s.start.Add(time.Duration(r.IntN(900))*time.Millisecond)))
	if s.result != "" {
		fmt.Fprintf(&b, "  <result>%s</result>\n  <duration>%d</duration>\n", s.result, s.duration.Milliseconds())
	}
	b.WriteString("  <charset>UTF-8</charset>\n  <keepLog>false</keepLog>\n")
	if s.pipeline {
		fmt.Fprintf(&b, "  <execution class=\"org.jenkinsci.plugins.workflow.cps.CpsFlowExecution\">\n    <result>%s</result>\n    <script>Jenkinsfile</script>\n    <loadedScripts class=\"map\"/>\n    <durabilityHint>PERFORMANCE_OPTIMIZED</durabilityHint>\n    <timings class=\"map\">\n      <entry>\n        <string>flowNode</string>\n        <long>%d</long>\n      </entry>\n      <entry>\n        <string>classLoad</string>\n        <long>%d</long>\n      </entry>\n    </timings>\n    <sandbox>true</sandbox>\n    <iota>%d</iota>\n    <head>1:%d</head>\n    <done>%t</done>\n    <resumeBlocked>false</resumeBlocked>\n    <storageDir>workflow-completed</storageDir>\n  </execution>\n  <completed>%t</completed>\n  <checkouts class=\"hudson.util.PersistedList\"/>\n",
			s.result, r.Int64N(900000000), r.Int64N(90000000), s.flowNodes+2, s.flowNodes+1, s.result != "", s.result != "")
	} else {
		fmt.Fprintf(&b, "  <builtOn>linux-agent-%02d</builtOn>\n  <workspace>/home/jenkins/agent/workspace/job</workspace>\n  <hudsonVersion>2.479.3</hudsonVersion>\n  <scm class=\"hudson.plugins.git.GitChangeLogParser\" plugin=\"git@5.6.0\">\n    <authorOrCommitter>false</authorOrCommitter>\n  </scm>\n  <culprits class=\"java.util.Collections$UnmodifiableSet\">\n    <string>dev%d</string>\n  </culprits>\n", r.IntN(20), r.IntN(50))
	}
	b.WriteString("</" + strings.Fields(root)[0] + ">")
	return b.String()
}

var stepDescriptors = []string{
	"org.jenkinsci.plugins.workflow.steps.durable_task.ShellStep",
	"org.jenkinsci.plugins.workflow.steps.EchoStep",
	"org.jenkinsci.plugins.workflow.support.steps.StageStep",
	"org.jenkinsci.plugins.workflow.support.steps.ExecutorStep",
	"org.jenkinsci.plugins.workflow.steps.CoreStep",
	"org.jenkinsci.plugins.credentialsbinding.impl.BindingStep",
	"hudson.tasks.junit.pipeline.JUnitResultsStep",
}

// flowNodeXML is one workflow/<id>.xml file (a Pipeline flow node).
func flowNodeXML(id int, t time.Time, r *rng) string {
	return xmlHead + "<Tag plugin=\"workflow-support@926.v9f4f9b_b_98c19\">\n  <node class=\"cps.n.StepAtomNode\" plugin=\"workflow-cps@3996.va_f5c1799f978\">\n    <parentIds>\n      <string>" + strconv.Itoa(id-1) + "</string>\n    </parentIds>\n    <id>" + strconv.Itoa(id) + "</id>\n    <descriptorId>" + r.pick(stepDescriptors) + "</descriptorId>\n  </node>\n  <actions>\n" +
		"    <org.jenkinsci.plugins.workflow.cps.actions.ArgumentsActionImpl plugin=\"workflow-cps@3996.va_f5c1799f978\">\n      <arguments>\n        <entry>\n          <string>script</string>\n          <string>./mvnw -B -pl " + r.pick(wordsMod) + " verify -Dbuild.id=" + r.hex(12) + "</string>\n        </entry>\n      </arguments>\n      <sensitiveVariables/>\n      <isUnmodifiedBySanitization>true</isUnmodifiedBySanitization>\n    </org.jenkinsci.plugins.workflow.cps.actions.ArgumentsActionImpl>\n" +
		"    <wf.a.TimingAction plugin=\"workflow-api@1336.vee415d95c521\">\n      <startTime>" + millis(t) + "</startTime>\n    </wf.a.TimingAction>\n    <s.a.LogStorageAction/>\n  </actions>\n</Tag>"
}

// flowNodeStoreXML is workflow-completed/flowNodeStore.xml: all flow nodes
// of a finished build in one file.
func flowNodeStoreXML(n int, t time.Time, r *rng) string {
	var b strings.Builder
	b.WriteString(xmlHead + "<linked-hash-map>\n")
	for id := 2; id < n+2; id++ {
		fmt.Fprintf(&b, "  <entry>\n    <string>%d</string>\n    <Tag plugin=\"workflow-support@926.v9f4f9b_b_98c19\">\n      <node class=\"cps.n.StepAtomNode\" plugin=\"workflow-cps@3996.va_f5c1799f978\">\n        <parentIds>\n          <string>%d</string>\n        </parentIds>\n        <id>%d</id>\n        <descriptorId>%s</descriptorId>\n      </node>\n      <actions>\n        <wf.a.TimingAction plugin=\"workflow-api@1336.vee415d95c521\">\n          <startTime>%d</startTime>\n        </wf.a.TimingAction>\n        <s.a.LogStorageAction/>\n      </actions>\n    </Tag>\n  </entry>\n",
			id, id-1, id, r.pick(stepDescriptors), t.UnixMilli()+int64(id)*int64(r.between(10, 9000)))
	}
	b.WriteString("</linked-hash-map>")
	return b.String()
}

// changelog is the git plugin's raw changelog: git log --raw output.
func changelog(commits int, t time.Time, r *rng) string {
	var b strings.Builder
	for range commits {
		who := r.pick([]string{"Alice Martin <alice@example.com>", "Bob Chen <bob@example.com>", "Zoë Lefèvre <zoe@example.com>", "dependabot[bot] <support@github.com>"})
		fmt.Fprintf(&b, "commit %s\ntree %s\nparent %s\nauthor %s %d +0000\ncommitter %s %d +0000\n\n    %s\n\n", r.hex(40), r.hex(40), r.hex(40), who, t.Unix(), who, t.Unix(), expand(r.pick(wordsMsg), r, ""))
		for range r.between(1, 6) {
			fmt.Fprintf(&b, ":100644 100644 %s %s M\t%s\n", r.hex(40), r.hex(40), placeholder("file", r, ""))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func junitXML(tests int, r *rng) string {
	var b strings.Builder
	b.WriteString(xmlHead + "<result plugin=\"junit@1300.v03d9d8a_cf1fb_\">\n  <suites>\n")
	for range max(1, tests/20) {
		cls := r.pick(wordsCls)
		fmt.Fprintf(&b, "    <suite>\n      <file>target/surefire-reports/TEST-com.example.%s.xml</file>\n      <name>com.example.%s</name>\n      <duration>%d.%03d</duration>\n      <cases>\n", cls, cls, r.IntN(30), r.IntN(1000))
		for range r.between(5, 35) {
			fmt.Fprintf(&b, "        <case>\n          <duration>0.%03d</duration>\n          <className>com.example.%s</className>\n          <testName>%s</testName>\n          <skipped>false</skipped>\n          <failedSince>0</failedSince>\n        </case>\n", r.IntN(1000), cls, r.pick(wordsMethod))
		}
		b.WriteString("      </cases>\n    </suite>\n")
	}
	b.WriteString("  </suites>\n  <duration>12.5</duration>\n  <keepLongStdio>false</keepLongStdio>\n</result>")
	return b.String()
}
