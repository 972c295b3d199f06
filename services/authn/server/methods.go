package server

import (
	"context"
	"log/slog"

	authnv1 "platform.io/proto/authn/v1"
	"platform.io/services/authn/authenticator"
	"platform.io/services/authn/bootstrap"
	"platform.io/services/authn/oidc"
	"platform.io/services/authn/requestheader"
	"platform.io/services/authn/serviceaccount"
	"platform.io/services/authn/tokenfile"
	"platform.io/services/authn/webhook"
	"platform.io/services/authn/x509"
)

// methods are the identity methods the configuration enables, in the order they are tried.
type methods struct {
	request  []authenticator.Method
	token    []authenticator.Method
	issuer   Issuer
	proxy    *requestheader.Authenticator
	sa       *serviceaccount.Authenticator
	audience []string
	anon     bool
}

// buildMethods builds every enabled method. The order is upstream's: the authenticating proxy,
// client certificates, then bearer tokens (token file, service accounts, bootstrap tokens, OIDC,
// webhook).
func buildMethods(ctx context.Context, cfg Config, objects authenticator.Objects, log *slog.Logger) (*methods, error) {
	m := &methods{anon: cfg.AnonymousAuth}
	if cfg.RequestHeaderClientCAFile != "" {
		rh, err := requestheader.New(requestheader.Config{
			ClientCAFile:        cfg.RequestHeaderClientCAFile,
			AllowedNames:        cfg.RequestHeaderAllowedNames,
			UsernameHeaders:     cfg.RequestHeaderUsernameHeaders,
			UIDHeaders:          cfg.RequestHeaderUIDHeaders,
			GroupHeaders:        cfg.RequestHeaderGroupHeaders,
			ExtraHeaderPrefixes: cfg.RequestHeaderExtraHeadersPrefix,
		}, log)
		if err != nil {
			return nil, err
		}
		m.proxy = rh
		m.request = append(m.request, rh)
	}
	if cfg.ClientCAFile != "" {
		x, err := x509.New(x509.Config{ClientCAFile: cfg.ClientCAFile}, log)
		if err != nil {
			return nil, err
		}
		m.request = append(m.request, x)
	}
	if cfg.TokenAuthFile != "" {
		tf, err := tokenfile.New(tokenfile.Config{File: cfg.TokenAuthFile, Logger: log})
		if err != nil {
			return nil, err
		}
		m.token = append(m.token, tf)
	}
	if len(cfg.ServiceAccountIssuers) > 0 {
		keyFiles := cfg.ServiceAccountKeyFiles
		if len(keyFiles) == 0 && cfg.ServiceAccountSigningKeyFile != "" {
			// The signing key verifies what it signs.
			keyFiles = []string{cfg.ServiceAccountSigningKeyFile}
		}
		sa, err := serviceaccount.New(serviceaccount.Config{
			Issuers:            cfg.ServiceAccountIssuers,
			KeyFiles:           keyFiles,
			SigningKeyFile:     cfg.ServiceAccountSigningKeyFile,
			APIAudiences:       cfg.APIAudiences,
			MaxTokenExpiration: cfg.ServiceAccountMaxTokenExpiration,
			Lookup:             cfg.ServiceAccountLookup,
			Objects:            objects,
			Logger:             log,
		})
		if err != nil {
			return nil, err
		}
		m.token = append(m.token, sa)
		m.sa = sa
		m.audience = sa.APIAudiences()
		if cfg.ServiceAccountSigningKeyFile != "" {
			m.issuer = sa
		}
	} else {
		m.audience = cfg.APIAudiences
	}
	if cfg.EnableBootstrapTokenAuth {
		bt, err := bootstrap.New(bootstrap.Config{Objects: objects, Logger: log})
		if err != nil {
			return nil, err
		}
		m.token = append(m.token, bt)
	}
	if cfg.OIDCIssuerURL != "" {
		required, err := oidc.ParseRequiredClaims(cfg.OIDCRequiredClaims)
		if err != nil {
			return nil, err
		}
		o, err := oidc.New(ctx, oidc.Config{
			IssuerURL:      cfg.OIDCIssuerURL,
			ClientID:       cfg.OIDCClientID,
			CAFile:         cfg.OIDCCAFile,
			UsernameClaim:  cfg.OIDCUsernameClaim,
			UsernamePrefix: cfg.OIDCUsernamePrefix,
			GroupsClaim:    cfg.OIDCGroupsClaim,
			GroupsPrefix:   cfg.OIDCGroupsPrefix,
			RequiredClaims: required,
			SigningAlgs:    cfg.OIDCSigningAlgs,
			APIAudiences:   m.audience,
		}, log)
		if err != nil {
			return nil, err
		}
		m.token = append(m.token, o)
	}
	if cfg.WebhookConfigFile != "" {
		w, err := webhook.New(webhook.Config{
			ConfigFile:   cfg.WebhookConfigFile,
			Version:      cfg.WebhookVersion,
			CacheTTL:     cfg.WebhookCacheTTL,
			APIAudiences: m.audience,
		}, log)
		if err != nil {
			return nil, err
		}
		m.token = append(m.token, w)
	}
	return m, nil
}

// describe is what Describe answers.
func (m *methods) describe(Config) *authnv1.DescribeResponse {
	d := &authnv1.DescribeResponse{Anonymous: m.anon, ApiAudiences: m.audience}
	if m.proxy != nil {
		d.RequestHeaderNames = m.proxy.Names()
		d.RequestHeaderPrefixes = m.proxy.Prefixes()
	}
	for _, t := range m.token {
		d.TokenMethods = append(d.TokenMethods, t.Name())
	}
	if m.sa != nil {
		d.ServiceAccountIssuer, d.ServiceAccountJwks, _ = m.sa.Discovery()
	}
	return d
}
