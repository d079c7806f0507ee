package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"github.com/no8s/no8s/services/internal/authn"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/internal/identityca"
)

// identityCmd is `no8s identity`: the installation's CA and the
// credentials of its processes.
func (a *app) identityCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "identity",
		Short: "Create the CA and issue, inspect and rotate process identities",
		Long: `Every no8s process proves who it is with a certificate from the installation's
CA: spiffe://no8s/<kind>/<name> (service/store, reconciler/noop, client/ci).
A reconciler's certificate also fixes the resource types it may serve.
Credentials are a directory of tls.crt, tls.key and ca.crt, and nats.creds:
the identity's NATS user, with its permissions. Processes read them again
when they change. NATS publishers and readers get a NATS user alone.`,
	}
	cmd.AddCommand(a.identityInitCmd(), a.identityIssueCmd(), a.identityShowCmd(), a.identityRotateCmd(), a.identityRetireCmd(), a.identityReleaseCmd(), a.identityNATSConfigCmd(), a.identityEnsureCmd())
	return cmd
}

func (a *app) identityInitCmd() *cobra.Command {
	var caDir string
	var withNATS bool
	cmd := &cobra.Command{
		Use:   "init-ca --ca-dir DIR [--nats]",
		Short: "Create the CA in DIR (nothing is changed when it exists, but for --nats)",
		Long: `Creates the installation's CA in DIR; nothing is changed when it exists.

--nats gives the CA NATS keys (nats.json), on a new CA or an existing one:
from then on every credential issued also holds the identity's NATS user
(nats.creds), and a nats-server configured with ` + "`no8s identity nats-config`" + ` takes
only those users, each with its identity's permissions. Issue the
credentials again after adding it.`,
		Args: func(_ *cobra.Command, args []string) error { return exactArgs(0, "no arguments")(args) },
		RunE: func(*cobra.Command, []string) error {
			ca, created, err := identityca.LoadOrCreate(caDir, a.now())
			if err != nil {
				return err
			}
			verb := "exists"
			if created {
				verb = "created"
			}
			fmt.Fprintf(a.streams.Out, "CA %s: %s (sha256 %s, valid until %s)\n", verb, caDir, fingerprint(ca.Certificate().Raw), ca.Certificate().NotAfter.UTC().Format(time.RFC3339))
			if withNATS {
				added, err := ca.EnableNATS(caDir)
				if err != nil {
					return err
				}
				if added {
					fmt.Fprintln(a.streams.Out, "NATS keys added: credentials issued from now on hold NATS users (nats.creds); write the server's configuration with `no8s identity nats-config`")
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&caDir, "ca-dir", "", "the CA directory (ca.crt, ca.key)")
	cmd.Flags().BoolVar(&withNATS, "nats", false, "give the CA NATS keys: NATS checks identities (nats.json)")
	_ = cmd.MarkFlagRequired("ca-dir")
	return cmd
}

func (a *app) identityIssueCmd() *cobra.Command {
	var (
		caDir, out, service, reconciler, clientName, publisher, reader, admin string
		types, hosts                                                          []string
		valid                                                                 time.Duration
	)
	cmd := &cobra.Command{
		Use:   "issue --ca-dir DIR --out DIR (--service NAME | --reconciler NAME --types T/v1,... | --client NAME | --nats-publisher NAME | --nats-reader NAME | --nats-admin NAME)",
		Short: "Issue credentials for a service, a reconciler deployment, automation or a NATS client",
		Example: `  no8s identity issue --ca-dir ca --out creds/store --service store
  no8s identity issue --ca-dir ca --out creds/noop --reconciler noop --types Noop/v1
  no8s identity issue --ca-dir ca --out creds/ci --client ci --valid 24h
  no8s identity issue --ca-dir ca --out creds/orders --nats-publisher orders`,
		Args: func(_ *cobra.Command, args []string) error { return exactArgs(0, "no arguments")(args) },
		RunE: func(*cobra.Command, []string) error {
			var id identity.ID
			switch n := countSet(service, reconciler, clientName, publisher, reader, admin); {
			case n != 1:
				return usagef("give exactly one of --service, --reconciler, --client, --nats-publisher, --nats-reader, --nats-admin")
			case service != "":
				id = identity.ServiceID(service)
			case reconciler != "":
				id = identity.ID{Kind: identity.Reconciler, Name: reconciler, Types: types}
			case publisher != "":
				id = identity.ID{Kind: identity.Publisher, Name: publisher}
			case reader != "":
				id = identity.ID{Kind: identity.Reader, Name: reader}
			case admin != "":
				id = identity.ID{Kind: identity.NATSAdmin, Name: admin}
			default:
				id = identity.ID{Kind: identity.Client, Name: clientName}
			}
			if len(types) > 0 && id.Kind != identity.Reconciler {
				return usagef("--types is for --reconciler only")
			}
			if err := id.Validate(); err != nil {
				return usagef("%v", err)
			}
			ca, err := identityca.Load(caDir)
			if err != nil {
				return err
			}
			if id.Kind.NATSOnly() {
				if len(hosts) > 0 {
					return usagef("--host is for certificates: a NATS %s has none", id.Kind)
				}
				if err := ca.IssueNATSTo(out, id, a.now(), valid); err != nil {
					return err
				}
				fmt.Fprintf(a.streams.Out, "issued the NATS user %s to %s (valid until %s): nats --creds %s\n", id, out,
					a.now().Add(valid).UTC().Format(time.RFC3339), filepath.Join(out, identity.NATSCredsFile))
				return nil
			}
			// A reconciler's types are claimed before its certificate exists.
			if err := identityca.ClaimTypes(caDir, id, a.now().Add(valid), a.now()); err != nil {
				return err
			}
			if err := ca.IssueTo(out, id, a.now(), valid, hosts...); err != nil {
				return err
			}
			creds, err := identity.Load(out)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.streams.Out, "issued %s to %s (valid until %s)\n", describeID(creds.ID()), out, creds.NotAfter().UTC().Format(time.RFC3339))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&caDir, "ca-dir", "", "the CA directory (ca.crt, ca.key)")
	f.StringVar(&out, "out", "", "the credentials directory to write (tls.crt, tls.key, ca.crt, nats.creds)")
	f.StringVar(&service, "service", "", "a control plane service: "+strings.Join(identity.Services(), ", "))
	f.StringVar(&reconciler, "reconciler", "", "a reconciler deployment, by the name it registers")
	f.StringSliceVar(&types, "types", nil, "the types the reconciler may serve (Name/version, comma-separated)")
	f.StringVar(&clientName, "client", "", "automation calling the API")
	f.StringVar(&publisher, "nats-publisher", "", "a NATS client sending changes (input subjects, their outcomes): a NATS user alone")
	f.StringVar(&reader, "nats-reader", "", "a NATS client reading the event stream: a NATS user alone")
	f.StringVar(&admin, "nats-admin", "", "an operator's break-glass NATS user that may do anything (give a short --valid)")
	f.StringSliceVar(&hosts, "host", nil, "a host name or IP address to add for tools that check host names (repeatable)")
	f.DurationVar(&valid, "valid", identityca.DefaultLeafValidity, "how long the certificate is valid")
	_ = cmd.MarkFlagRequired("ca-dir")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

func (a *app) identityNATSConfigCmd() *cobra.Command {
	var caDir, out string
	cmd := &cobra.Command{
		Use:   "nats-config --ca-dir DIR [--out FILE]",
		Short: "Write the nats-server configuration that trusts the CA's NATS users",
		Long: `Writes the part of a nats-server configuration that makes the server take only
the NATS users this CA issues, each with its identity's permissions: the
operator, the system account and a memory resolver with the no8s account.
deploy/nats/nats-server.conf includes it as no8s-auth.conf.`,
		Example: `  no8s identity nats-config --ca-dir ca --out /etc/nats/no8s-auth.conf`,
		Args:    func(_ *cobra.Command, args []string) error { return exactArgs(0, "no arguments")(args) },
		RunE: func(*cobra.Command, []string) error {
			ca, err := identityca.Load(caDir)
			if err != nil {
				return err
			}
			srv, err := ca.NATSServer(a.now())
			if err != nil {
				return err
			}
			if out == "" {
				_, err = a.streams.Out.Write(srv.Config())
				return err
			}
			if err := os.WriteFile(out, srv.Config(), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(a.streams.Out, "wrote %s: include it in the nats-server configuration and reload the server\n", out)
			return nil
		},
	}
	cmd.Flags().StringVar(&caDir, "ca-dir", "", "the CA directory (ca.crt, ca.key, nats.json)")
	cmd.Flags().StringVar(&out, "out", "", "the file to write (standard output when absent)")
	_ = cmd.MarkFlagRequired("ca-dir")
	return cmd
}

func (a *app) identityEnsureCmd() *cobra.Command {
	var (
		caDir, out, natsConfig       string
		bootstrapToken, helmValues   string
		services, reconcilers, hosts []string
		publishers, readers          []string
		valid, renewBefore           time.Duration
	)
	cmd := &cobra.Command{
		Use:   "ensure --ca-dir DIR --out DIR [--reconciler NAME=T/v1,...]... [--nats-config FILE]",
		Short: "Create the CA if missing and issue every missing or stale credential of a deployment",
		Long: `Makes a deployment's identities hold, changing only what is missing or stale,
so that it can run at every start (the Compose file's one-shot identity
service does) and again at any time:

  - the CA in --ca-dir, created with NATS keys when it has none (NATS keys
    are added to a CA without them);
  - one credentials directory per identity under --out, named
    <kind>-<name> (service-store, reconciler-tenant, publisher-orders),
    issued again when it is missing, holds another identity or other types,
    trusts another CA bundle (after rotate-ca), has no NATS user or one of
    other keys, or expires within --renew-before;
  - with --nats-config, the nats-server include that takes only the CA's
    NATS users (as nats-config writes it), written when missing or written
    from other keys;
  - with --bootstrap-token, the gateways' bootstrap token (the first
    administrator's), created when the file is missing;
  - with --helm-values, the Helm chart's identity values (deploy/helm/no8s):
    every credential above, the nats-server include and the bootstrap
    token, written every time (mode 0600).

Every control plane service is issued unless --services says otherwise.
A reconciler's types are claimed in the CA directory as issue claims them:
a type another reconciler holds fails the command, naming it.`,
		Example: `  no8s identity ensure --ca-dir /var/lib/no8s/ca --out /var/lib/no8s/identity \
    --reconciler tenant=Tenant/v1 --reconciler noop=DatabaseCluster/v1,WebApp/v1 \
    --nats-publisher queue-input --nats-reader events \
    --nats-config /var/lib/no8s/nats/no8s-auth.conf`,
		Args: func(_ *cobra.Command, args []string) error { return exactArgs(0, "no arguments")(args) },
		RunE: func(*cobra.Command, []string) error {
			var ids []identity.ID
			for _, s := range services {
				ids = append(ids, identity.ServiceID(s))
			}
			for _, r := range reconcilers {
				name, types, ok := strings.Cut(r, "=")
				if !ok || name == "" || types == "" {
					return usagef("--reconciler %q: want NAME=Type/v1[,Type/v1...]", r)
				}
				ids = append(ids, identity.ID{Kind: identity.Reconciler, Name: name, Types: strings.Split(types, ",")})
			}
			for _, p := range publishers {
				ids = append(ids, identity.ID{Kind: identity.Publisher, Name: p})
			}
			for _, r := range readers {
				ids = append(ids, identity.ID{Kind: identity.Reader, Name: r})
			}
			for _, id := range ids {
				if err := id.Validate(); err != nil {
					return usagef("%v", err)
				}
			}
			ca, res, err := identityca.Ensure(identityca.Deployment{CADir: caDir, CredentialsRoot: out, IDs: ids, Hosts: hosts,
				NATSConfig: natsConfig, Validity: valid, RenewBefore: renewBefore}, a.now())
			if err != nil {
				return err
			}
			w := a.streams.Out
			switch {
			case res.CACreated:
				fmt.Fprintf(w, "CA created in %s, with NATS keys\n", caDir)
			case res.NATSKeysAdded:
				fmt.Fprintf(w, "CA %s: NATS keys added\n", caDir)
			default:
				fmt.Fprintf(w, "CA %s: kept\n", caDir)
			}
			for _, id := range ids {
				dir := identityca.CredentialsDir(out, id)
				if why, ok := res.Issued[id.String()]; ok {
					fmt.Fprintf(w, "issued %s to %s (%s)\n", describeID(id), dir, why)
				} else {
					fmt.Fprintf(w, "kept %s in %s\n", describeID(id), dir)
				}
			}
			if bootstrapToken != "" {
				_, created, err := authn.EnsureBootstrapToken(bootstrapToken)
				if err != nil {
					return err
				}
				verb := "kept"
				if created {
					verb = "created"
				}
				fmt.Fprintf(w, "%s %s: the gateways' bootstrap token (the first administrator's)\n", verb, bootstrapToken)
			}
			if natsConfig != "" {
				verb := "kept"
				if res.NATSConfigWritten {
					verb = "wrote"
				}
				fmt.Fprintf(w, "%s %s: the nats-server include that takes only the CA's NATS users\n", verb, natsConfig)
			}
			if helmValues != "" {
				auth, err := natsInclude(ca, natsConfig, a.now())
				if err != nil {
					return err
				}
				if err := writeHelmValues(helmValues, out, ids, auth, bootstrapToken); err != nil {
					return err
				}
				fmt.Fprintf(w, "wrote %s: the Helm chart's identity values (private keys: keep it as secret as the CA), for helm install -f\n", helmValues)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&caDir, "ca-dir", "", "the CA directory (created when it has no CA)")
	f.StringVar(&out, "out", "", "the directory holding one credentials directory per identity (<kind>-<name>)")
	f.StringSliceVar(&services, "services", identity.Services(), "the control plane services to issue (comma-separated)")
	f.StringArrayVar(&reconcilers, "reconciler", nil, "a reconciler deployment and the types it serves, NAME=Type/v1[,Type/v1...] (repeatable)")
	f.StringSliceVar(&publishers, "nats-publisher", nil, "a NATS publisher (queue input) to issue a NATS user alone (repeatable)")
	f.StringSliceVar(&readers, "nats-reader", nil, "a NATS reader (CloudEvents consumer) to issue a NATS user alone (repeatable)")
	f.StringVar(&natsConfig, "nats-config", "", "write the nats-server include here (as nats-config does) when missing or stale")
	f.StringVar(&bootstrapToken, "bootstrap-token", "", "create the gateways' bootstrap token in this file (mode 0600) when missing: their --bootstrap-token-file")
	f.StringVar(&helmValues, "helm-values", "", "write the Helm chart's identity values (every credential, the NATS include, the bootstrap token) to this file, mode 0600")
	f.StringSliceVar(&hosts, "host", nil, "a host name or IP address added to every certificate for tools that check host names (repeatable)")
	f.DurationVar(&valid, "valid", identityca.DefaultLeafValidity, "how long what is issued is valid")
	f.DurationVar(&renewBefore, "renew-before", identityca.DefaultRenewBefore, "issue again what expires within this")
	_ = cmd.MarkFlagRequired("ca-dir")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

func (a *app) identityShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show DIR",
		Short: "Print the identity of a credentials directory and when it expires",
		Args:  func(_ *cobra.Command, args []string) error { return exactArgs(1, "a credentials directory")(args) },
		RunE: func(_ *cobra.Command, args []string) error {
			creds, err := identity.Load(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(a.streams.Out, "%s\nvalid until %s\n", describeID(creds.ID()), creds.NotAfter().UTC().Format(time.RFC3339))
			return nil
		},
	}
}

func (a *app) identityRotateCmd() *cobra.Command {
	var caDir string
	cmd := &cobra.Command{
		Use:   "rotate-ca --ca-dir DIR",
		Short: "Start a CA rotation: a new CA issues, the old one stays trusted",
		Long: `Creates a new CA in DIR and keeps the old one in ca.crt, so that both are
trusted. Then: copy the new ca.crt into every credentials directory, issue
every identity again, and finish with "no8s identity retire-ca".`,
		Args: func(_ *cobra.Command, args []string) error { return exactArgs(0, "no arguments")(args) },
		RunE: func(*cobra.Command, []string) error {
			ca, err := identityca.Load(caDir)
			if err != nil {
				return err
			}
			next, err := ca.Rotate(a.now(), identityca.DefaultCAValidity)
			if err != nil {
				return err
			}
			if err := next.Save(caDir); err != nil {
				return err
			}
			fmt.Fprintf(a.streams.Out, "CA rotated in %s: new sha256 %s; old sha256 %s still trusted\n", caDir, fingerprint(next.Certificate().Raw), fingerprint(ca.Certificate().Raw))
			return nil
		},
	}
	cmd.Flags().StringVar(&caDir, "ca-dir", "", "the CA directory (ca.crt, ca.key)")
	_ = cmd.MarkFlagRequired("ca-dir")
	return cmd
}

func (a *app) identityRetireCmd() *cobra.Command {
	var caDir string
	cmd := &cobra.Command{
		Use:   "retire-ca --ca-dir DIR",
		Short: "End a CA rotation: only the issuing CA stays in ca.crt",
		Args:  func(_ *cobra.Command, args []string) error { return exactArgs(0, "no arguments")(args) },
		RunE: func(*cobra.Command, []string) error {
			ca, err := identityca.Load(caDir)
			if err != nil {
				return err
			}
			if err := ca.Retire().Save(caDir); err != nil {
				return err
			}
			fmt.Fprintf(a.streams.Out, "CA bundle in %s holds sha256 %s only\n", caDir, fingerprint(ca.Certificate().Raw))
			return nil
		},
	}
	cmd.Flags().StringVar(&caDir, "ca-dir", "", "the CA directory (ca.crt, ca.key)")
	_ = cmd.MarkFlagRequired("ca-dir")
	return cmd
}

func (a *app) identityReleaseCmd() *cobra.Command {
	var caDir string
	cmd := &cobra.Command{
		Use:   "release-type --ca-dir DIR TYPE/VERSION...",
		Short: "Free types a reconciler was issued, so that another reconciler may be issued them",
		Long: `The CA issues each type to one reconciler at a time: issuing a type that an
unexpired certificate of another reconciler claims is refused. Once that
reconciler no longer serves the type, release it here; its certificate stays
valid until it expires, so stop the old reconciler (or let its credential
expire) before the new one starts.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("name at least one type (Name/version)")
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			released, err := identityca.ReleaseTypes(caDir, args)
			if err != nil {
				return err
			}
			for _, t := range args {
				if c, ok := released[t]; ok {
					fmt.Fprintf(a.streams.Out, "released %s (was reconciler/%s's until %s)\n", t, c.Reconciler, c.Until.UTC().Format(time.RFC3339))
				} else {
					fmt.Fprintf(a.streams.Out, "%s: not claimed\n", t)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&caDir, "ca-dir", "", "the CA directory (ca.crt, ca.key)")
	_ = cmd.MarkFlagRequired("ca-dir")
	return cmd
}

// describeID is an identity with its type claims.
func describeID(id identity.ID) string {
	if len(id.Types) == 0 {
		return id.String()
	}
	return fmt.Sprintf("%s (types %s)", id, strings.Join(id.Types, ", "))
}

// fingerprint is the SHA-256 of a DER certificate, hex, as openssl prints
// it without colons.
func fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// countSet counts the non-empty strings.
func countSet(values ...string) int {
	n := 0
	for _, v := range values {
		if v != "" {
			n++
		}
	}
	return n
}
