// Package operatorcheck holds the custom resource of the Jenkins
// kubernetes-operator (jenkins.io/v1alpha2, kind Jenkins) as that operator
// declares it, so that examples/operator can be decoded strictly against
// the API the operator really serves.
//
// It is its own module because the operator's API is built on k8s.io/api
// v0.30 (the operator's go.mod at v0.9.0-beta2 requires v0.30.3, and its
// CRD is generated from those types): fields Kubernetes added later, such
// as the image volume source, must fail here although the homesnap module's
// newer k8s.io/api knows them.
//
// The types follow api/v1alpha2/jenkins_types.go of
// github.com/jenkinsci/kubernetes-operator at v0.9.0-beta2 field for field
// (same JSON names, same Kubernetes types), status left out: a user never
// writes it. A field is written without omitempty exactly where the
// operator's CRD (config/crd/bases/jenkins.io_jenkins.yaml) requires it;
// the operator marks some optional with +optional instead. Where this file
// and those differ, they are right.
package operatorcheck

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// APIVersion and Kind name the resource the operator watches.
const (
	APIVersion = "jenkins.io/v1alpha2"
	Kind       = "Jenkins"
)

// Jenkins is the custom resource.
type Jenkins struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              JenkinsSpec `json:"spec,omitempty"`
}

// JenkinsSpec is the resource's spec.
type JenkinsSpec struct {
	Master                   JenkinsMaster      `json:"master"`
	SeedJobs                 []SeedJob          `json:"seedJobs,omitempty"`
	SeedJobAgentImage        string             `json:"seedJobAgentImage,omitempty"`
	ValidateSecurityWarnings bool               `json:"validateSecurityWarnings,omitempty"`
	Notifications            []Notification     `json:"notifications,omitempty"`
	Service                  Service            `json:"service,omitempty"`
	SlaveService             Service            `json:"slaveService,omitempty"`
	Backup                   Backup             `json:"backup,omitempty"`
	Restore                  Restore            `json:"restore,omitempty"`
	GroovyScripts            Customization      `json:"groovyScripts,omitempty"`
	ConfigurationAsCode      Customization      `json:"configurationAsCode,omitempty"`
	Roles                    []rbacv1.RoleRef   `json:"roles,omitempty"`
	ServiceAccount           ServiceAccount     `json:"serviceAccount,omitempty"`
	JenkinsAPISettings       JenkinsAPISettings `json:"jenkinsAPISettings"`
}

// JenkinsAPISettings says how the operator talks to Jenkins' API:
// "createUser" or "serviceAccount".
type JenkinsAPISettings struct {
	AuthorizationStrategy string `json:"authorizationStrategy"`
}

// ServiceAccount is what the operator lets a user set on the pod's
// ServiceAccount, which it creates itself.
type ServiceAccount struct {
	Annotations map[string]string `json:"annotations,omitempty"`
}

// JenkinsMaster is the pod: the operator takes containers[0] as Jenkins and
// has no init containers.
type JenkinsMaster struct {
	Annotations                   map[string]string             `json:"annotations,omitempty"`
	Labels                        map[string]string             `json:"labels,omitempty"`
	NodeSelector                  map[string]string             `json:"nodeSelector,omitempty"`
	SecurityContext               *corev1.PodSecurityContext    `json:"securityContext,omitempty"`
	Containers                    []Container                   `json:"containers,omitempty"`
	ImagePullSecrets              []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	Volumes                       []corev1.Volume               `json:"volumes,omitempty"`
	Tolerations                   []corev1.Toleration           `json:"tolerations,omitempty"`
	BasePlugins                   []Plugin                      `json:"basePlugins,omitempty"`
	Plugins                       []Plugin                      `json:"plugins,omitempty"`
	LatestPlugins                 *bool                         `json:"latestPlugins,omitempty"`
	SkipPlugins                   *bool                         `json:"skipPlugins,omitempty"`
	DisableCSRFProtection         bool                          `json:"disableCSRFProtection"`
	PriorityClassName             string                        `json:"priorityClassName,omitempty"`
	HostAliases                   []corev1.HostAlias            `json:"hostAliases,omitempty"`
	TerminationGracePeriodSeconds *int64                        `json:"terminationGracePeriodSeconds,omitempty"`
}

// Container is the operator's own container type: a subset of
// corev1.Container (no startupProbe, no restartPolicy, no resizePolicy).
type Container struct {
	Name            string                      `json:"name"`
	Image           string                      `json:"image"`
	ImagePullPolicy corev1.PullPolicy           `json:"imagePullPolicy"`
	Resources       corev1.ResourceRequirements `json:"resources"`
	Command         []string                    `json:"command,omitempty"`
	Args            []string                    `json:"args,omitempty"`
	WorkingDir      string                      `json:"workingDir,omitempty"`
	Ports           []corev1.ContainerPort      `json:"ports,omitempty"`
	EnvFrom         []corev1.EnvFromSource      `json:"envFrom,omitempty"`
	Env             []corev1.EnvVar             `json:"env,omitempty"`
	VolumeMounts    []corev1.VolumeMount        `json:"volumeMounts,omitempty"`
	LivenessProbe   *corev1.Probe               `json:"livenessProbe,omitempty"`
	ReadinessProbe  *corev1.Probe               `json:"readinessProbe,omitempty"`
	Lifecycle       *corev1.Lifecycle           `json:"lifecycle,omitempty"`
	SecurityContext *corev1.SecurityContext     `json:"securityContext,omitempty"`
}

// Plugin is a Jenkins plugin the operator installs.
type Plugin struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	DownloadURL string `json:"downloadURL,omitempty"`
}

// Service is one of the two Services the operator creates.
type Service struct {
	Annotations              map[string]string  `json:"annotations,omitempty"`
	Labels                   map[string]string  `json:"labels,omitempty"`
	Type                     corev1.ServiceType `json:"type,omitempty"`
	Port                     int32              `json:"port,omitempty"`
	NodePort                 int32              `json:"nodePort,omitempty"`
	LoadBalancerSourceRanges []string           `json:"loadBalancerSourceRanges,omitempty"`
	LoadBalancerIP           string             `json:"loadBalancerIP,omitempty"`
}

// Handler is a command the operator execs in a container.
type Handler struct {
	Exec *corev1.ExecAction `json:"exec,omitempty"`
}

// Backup is the operator's exec-driven backup.
type Backup struct {
	ContainerName               string  `json:"containerName"`
	Action                      Handler `json:"action"`
	Interval                    uint64  `json:"interval"`
	MakeBackupBeforePodDeletion bool    `json:"makeBackupBeforePodDeletion"`
}

// Restore is the operator's exec-driven restore.
type Restore struct {
	ContainerName   string  `json:"containerName"`
	Action          Handler `json:"action"`
	GetLatestAction Handler `json:"getLatestAction,omitempty"`
	RecoveryOnce    uint64  `json:"recoveryOnce,omitempty"`
}

// Customization is groovyScripts and configurationAsCode (the operator
// inlines the same struct in two named types).
type Customization struct {
	Secret         NameRef   `json:"secret"`
	Configurations []NameRef `json:"configurations"`
}

// NameRef names a Secret or ConfigMap.
type NameRef struct {
	Name string `json:"name"`
}

// SeedJob is a job-DSL repository the operator seeds Jenkins from.
type SeedJob struct {
	ID                    string `json:"id,omitempty"`
	CredentialID          string `json:"credentialID,omitempty"`
	Description           string `json:"description,omitempty"`
	Targets               string `json:"targets,omitempty"`
	RepositoryBranch      string `json:"repositoryBranch,omitempty"`
	RepositoryURL         string `json:"repositoryUrl,omitempty"`
	CredentialType        string `json:"credentialType,omitempty"`
	BitbucketPushTrigger  bool   `json:"bitbucketPushTrigger,omitempty"`
	GitHubPushTrigger     bool   `json:"githubPushTrigger,omitempty"`
	BuildPeriodically     string `json:"buildPeriodically,omitempty"`
	PollSCM               string `json:"pollSCM,omitempty"`
	IgnoreMissingFiles    bool   `json:"ignoreMissingFiles,omitempty"`
	AdditionalClasspath   string `json:"additionalClasspath,omitempty"`
	FailOnMissingPlugin   bool   `json:"failOnMissingPlugin,omitempty"`
	UnstableOnDeprecation bool   `json:"unstableOnDeprecation,omitempty"`
}

// Notification is where the operator reports its own events.
type Notification struct {
	Level   string   `json:"level"`
	Verbose bool     `json:"verbose"`
	Name    string   `json:"name"`
	Slack   *WebHook `json:"slack,omitempty"`
	Teams   *WebHook `json:"teams,omitempty"`
	Mailgun *Mailgun `json:"mailgun,omitempty"`
	SMTP    *SMTP    `json:"smtp,omitempty"`
}

// WebHook is Slack's and Teams' configuration.
type WebHook struct {
	WebHookURLSecretKeySelector SecretKeySelector `json:"webHookURLSecretKeySelector"`
}

// Mailgun is the Mailgun notifier.
type Mailgun struct {
	Domain                  string            `json:"domain"`
	APIKeySecretKeySelector SecretKeySelector `json:"apiKeySecretKeySelector"`
	Recipient               string            `json:"recipient"`
	From                    string            `json:"from"`
}

// SMTP is the mail notifier.
type SMTP struct {
	UsernameSecretKeySelector SecretKeySelector `json:"usernameSecretKeySelector"`
	PasswordSecretKeySelector SecretKeySelector `json:"passwordSecretKeySelector"`
	Port                      int               `json:"port"`
	Server                    string            `json:"server"`
	TLSInsecureSkipVerify     bool              `json:"tlsInsecureSkipVerify,omitempty"`
	From                      string            `json:"from"`
	To                        string            `json:"to"`
}

// SecretKeySelector is a key of a Secret.
type SecretKeySelector struct {
	Secret corev1.LocalObjectReference `json:"secret"`
	Key    string                      `json:"key"`
}
