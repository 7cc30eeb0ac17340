package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// VeleroNamespace is the namespace the Velero server runs for.
const VeleroNamespace = "velero"

// CLITimeout bounds a velero CLI command, "--wait" included.
const CLITimeout = 3 * time.Minute

// Velero is a Velero server running for one management cluster, with the
// AWS object-store plugin and initlock's plugin, its backup storage
// location the S3 server's bucket.
type Velero struct {
	*Proc
	m          *Mgmt
	kubeconfig string
}

// veleroObjects are what "velero install" would create, less the server's
// Deployment: the namespace, the credentials of the bucket, the backup
// storage location, and a Deployment velero/velero with no replicas, which
// the built-in pod-volume restore action reads.
func veleroObjects(s3 *S3) []client.Object {
	labels := map[string]string{"component": "velero"}
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: VeleroNamespace}},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: VeleroNamespace, Name: "cloud-credentials"},
			StringData: map[string]string{"cloud": "[default]\naws_access_key_id = initlock\naws_secret_access_key = initlock-secret\n"},
		},
		&velerov1.BackupStorageLocation{
			ObjectMeta: metav1.ObjectMeta{Namespace: VeleroNamespace, Name: "default"},
			Spec: velerov1.BackupStorageLocationSpec{
				Provider: "aws",
				Default:  true,
				StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{
					Bucket: s3.Bucket,
				}},
				Credential: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "cloud-credentials"}, Key: "cloud",
				},
				Config: map[string]string{"region": "us-east-1", "s3ForcePathStyle": "true", "s3Url": s3.URL},
				// Backups made by another management cluster's server on
				// the same bucket show up within seconds.
				BackupSyncPeriod:    &metav1.Duration{Duration: 2 * time.Second},
				ValidationFrequency: &metav1.Duration{Duration: 10 * time.Second},
			},
		},
		&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: VeleroNamespace, Name: "velero", Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](0),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: "velero", Image: "velero/velero:" + VeleroVersion,
					}}},
				},
			},
		},
	}
}

// StartVelero installs Velero's objects (once) and starts its server with
// the AWS object-store plugin and, with initlockPlugin, initlock's plugin,
// and returns when the backup storage location is Available. Only one
// Velero server may run at a time on a machine: its controller manager
// always binds :8080.
func (m *Mgmt) StartVelero(ctx context.Context, initlockPlugin bool) (*Velero, error) {
	if m.velero != nil {
		return nil, fmt.Errorf("a Velero server already runs in %s", m.Name)
	}
	if m.opts.S3 == nil {
		return nil, errors.New("the management cluster has no S3 server to store backups in")
	}
	for _, o := range veleroObjects(m.opts.S3) {
		if err := m.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("installing Velero: %w", err)
		}
	}
	kubeconfig, err := m.Env.WriteKubeconfig("velero", []string{"system:masters"})
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(m.Dir, "velero")
	plugins := filepath.Join(dir, "plugins-upstream")
	bins := []string{m.bins.path(BinVeleroAWS)}
	if initlockPlugin {
		plugins = filepath.Join(dir, "plugins-initlock")
		bins = append(bins, m.bins.VeleroPlugin)
	}
	tmp := filepath.Join(dir, "tmp")
	for _, d := range []string{plugins, tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	for _, p := range bins {
		link := filepath.Join(plugins, filepath.Base(p))
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		if err := os.Symlink(abs, link); err != nil {
			return nil, err
		}
	}
	// Another program of the machine may hold :8080 for a while (a test
	// of someone else's running a metrics server); try for two minutes.
	var (
		v        *Velero
		startErr error
	)
	err = Poll(ctx, 2*time.Minute, func(ctx context.Context) error {
		v, startErr = m.startVeleroServer(ctx, kubeconfig, plugins, tmp)
		if startErr != nil && strings.Contains(startErr.Error(), "bind: address already in use") {
			return startErr
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if startErr != nil {
		return nil, startErr
	}
	m.velero = v
	return v, nil
}

// startVeleroServer runs the server once and waits until it has validated
// the backup storage location.
func (m *Mgmt) startVeleroServer(ctx context.Context, kubeconfig, plugins, tmp string) (*Velero, error) {
	addrs, err := freeAddrs(1)
	if err != nil {
		return nil, err
	}
	// The server re-runs its own binary for its built-in plugins, so it
	// is started by absolute path; it writes credential files to TMPDIR.
	p, err := startProc(filepath.Dir(plugins), fmt.Sprintf("velero-server-%d", m.veleroStarts), m.bins.path(BinVelero), []string{
		"server",
		"--kubeconfig", kubeconfig,
		"--namespace", VeleroNamespace,
		"--plugin-dir", plugins,
		"--metrics-address", addrs[0],
		"--profiler-address", "",
		"--uploader-type", "kopia",
		"--backup-sync-period", "2s",
		"--store-validation-frequency", "10s",
	}, []string{"TMPDIR=" + tmp})
	if err != nil {
		return nil, err
	}
	m.veleroStarts++
	// Ready once this server has validated the location: a phase left
	// Available by an earlier server says nothing about this one.
	started := metav1.NewTime(time.Now().Truncate(time.Second))
	err = p.waitFor(ctx, 2*time.Minute, "validating the backup storage location", func(ctx context.Context) error {
		bsl := &velerov1.BackupStorageLocation{}
		if err := m.Client.Get(ctx, client.ObjectKey{Namespace: VeleroNamespace, Name: "default"}, bsl); err != nil {
			return err
		}
		if bsl.Status.LastValidationTime == nil || bsl.Status.LastValidationTime.Before(&started) {
			return errors.New("not validated by this server yet")
		}
		if bsl.Status.Phase != velerov1.BackupStorageLocationPhaseAvailable {
			return fmt.Errorf("phase %q: %s", bsl.Status.Phase, bsl.Status.Message)
		}
		return nil
	})
	if err != nil {
		p.Stop()
		return nil, err
	}
	return &Velero{Proc: p, m: m, kubeconfig: kubeconfig}, nil
}

// StopVelero stops the Velero server, if one runs.
func (m *Mgmt) StopVelero() {
	if m.velero != nil {
		m.velero.Stop()
		m.velero = nil
	}
}

// CLI runs the velero CLI of the same binary with args, as a user whose
// KUBECONFIG names this management cluster, and returns its output. A
// command still running after CLITimeout is killed.
func (v *Velero) CLI(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, CLITimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, v.m.bins.path(BinVelero), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+v.kubeconfig, "TMPDIR="+filepath.Join(v.m.Dir, "velero", "tmp"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		// The cause last as well: a long log tail hides it otherwise.
		cmdline := strings.Join(args, " ")
		return out.String(), fmt.Errorf("velero %s: %w\n%s\nlast lines of %s:\n%s\n(velero %s: %w)",
			cmdline, err, out.String(), v.LogPath, v.Tail(40), cmdline, err)
	}
	return out.String(), nil
}

// Backup returns the Backup name, as the server reports it.
func (v *Velero) Backup(ctx context.Context, name string) (*velerov1.Backup, error) {
	b := &velerov1.Backup{}
	err := v.m.Client.Get(ctx, client.ObjectKey{Namespace: VeleroNamespace, Name: name}, b)
	return b, err
}

// Restore returns the Restore name, as the server reports it.
func (v *Velero) Restore(ctx context.Context, name string) (*velerov1.Restore, error) {
	r := &velerov1.Restore{}
	err := v.m.Client.Get(ctx, client.ObjectKey{Namespace: VeleroNamespace, Name: name}, r)
	return r, err
}

// WaitBackupSynced waits until the server has read the Backup name from the
// bucket (a backup made by another management cluster's server). Velero's
// backup sync runs when its server starts and then once a minute, and skips
// a location not yet validated: the first server of a management cluster
// finds a backup of another one about a minute after it started. The wait
// spans four ticks, so that a loaded machine's late validation or slow tick
// does not fail a scenario.
func (v *Velero) WaitBackupSynced(ctx context.Context, name string) error {
	return v.waitFor(ctx, 4*time.Minute, "syncing backup "+name+" from the bucket", func(ctx context.Context) error {
		b, err := v.Backup(ctx, name)
		if err != nil {
			return err
		}
		if b.Status.Phase != velerov1.BackupPhaseCompleted {
			return fmt.Errorf("backup %s is %q", name, b.Status.Phase)
		}
		return nil
	})
}
