package protocol

import "encoding/json"

// Context Packages (spec 13.3): a signed, versioned, scoped summary of a
// Group's history, never a replacement for it. These are the rules every
// holder of a package shares — the authority checking one before it
// accepts it, a worker reading one back from its store, a handler given
// one — so each is written once, here.

// ContextDigest is the digest a later version names in previousVersion:
// the JCS bytes of the whole signed package, signature included, so a new
// version is bound to the exact bytes of the one it replaces.
func ContextDigest(p ContextPackage) (string, error) {
	b, err := Marshal(p)
	if err != nil {
		return "", err
	}
	return Digest(b), nil
}

// SignContextPackage returns p signed by k. A package has no issuedAt, so
// the signature's createdAt is its generatedAt (VerifyContextPackage holds
// the two equal): a package cannot claim a time its signature denies.
func SignContextPackage(p ContextPackage, k PrivateKey) (ContextPackage, error) {
	p.Signature = Signature{Alg: SignatureAlgEd25519, KeyID: k.KeyID, CreatedAt: p.GeneratedAt}
	doc, err := toDoc(p)
	if err != nil {
		return p, err
	}
	if err := Sign(doc, k, p.GeneratedAt.Time); err != nil {
		return p, err
	}
	raw, err := Canonical(doc)
	if err != nil {
		return p, err
	}
	var out ContextPackage
	err = json.Unmarshal(raw, &out)
	return out, err
}

// VerifyContextPackage checks p's signature: made by a key of its
// generator agent (KeyBelongsTo), with createdAt equal to generatedAt, over
// the package's JCS bytes. Every failure is AUTH_INVALID_SIGNATURE with a
// pointer into the package.
func VerifyContextPackage(p ContextPackage, keys KeyResolver) error {
	if !KeyBelongsTo(p.Signature.KeyID, ActorAgent, p.Generator.AgentID) {
		return Errorf(CodeAuthInvalidSignature, "context package %s is signed with key %q, not one of its generator %s", p.PackageID, p.Signature.KeyID, p.Generator.AgentID).At("/signature/keyId")
	}
	if !p.Signature.CreatedAt.Equal(p.GeneratedAt.Time) {
		return Errorf(CodeAuthInvalidSignature, "context package %s: signature.createdAt %s differs from generatedAt %s", p.PackageID, p.Signature.CreatedAt, p.GeneratedAt).At("/signature/createdAt")
	}
	doc, err := toDoc(p)
	if err != nil {
		return Errorf(CodeAuthInvalidSignature, "context package %s: %v", p.PackageID, err)
	}
	return Verify(doc, keys)
}

// DecodeContextPackage decodes a package from outside (a handler's store,
// a file, a frame): strict I-JSON, then context-package.schema.json, then
// the typed value. It does not judge the signature (VerifyContextPackage)
// nor the scope (the reader's to check against what it runs).
func DecodeContextPackage(data []byte, opts DecodeOptions) (ContextPackage, error) {
	var p ContextPackage
	doc, err := Parse(data, opts)
	if err != nil {
		return p, err
	}
	if err := Validate("context-package", doc); err != nil {
		return p, err
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return p, Errorf(CodeSchemaValidationFailed, "context package: %v", err)
	}
	if err := p.SourceEvents.Check(); err != nil {
		return p, Under(err, "/sourceEvents")
	}
	return p, nil
}

// Check refuses a range that is not one of Group sequences: from 1 up to
// toSequence (INVALID_COMMAND).
func (r EventRange) Check() error {
	if r.FromSequence == 0 || r.FromSequence > r.ToSequence {
		return InvalidCommand("events %d…%d of group %s are not a range of sequences", r.FromSequence, r.ToSequence, r.GroupID).At("/fromSequence")
	}
	return nil
}

// Covers reports whether the package may be given to a run of WorkItem
// workItemID of Mission missionID in Group groupID: its scope names that
// Mission and Group, and that WorkItem or none (a Mission-wide package).
// Spec 13.3: content of one Mission never enters another's context.
func (p ContextPackage) Covers(groupID, missionID, workItemID string) error {
	s := p.Scope
	switch {
	case s.GroupID != groupID:
		return Errorf(CodeInvalidCommand, "context package %s is scoped to Group %s, not %s", p.PackageID, s.GroupID, groupID).At("/scope/groupId")
	case s.MissionID != missionID:
		return Errorf(CodeInvalidCommand, "context package %s is scoped to Mission %s, not %s", p.PackageID, s.MissionID, missionID).At("/scope/missionId")
	case s.WorkItemID != "" && s.WorkItemID != workItemID:
		return Errorf(CodeInvalidCommand, "context package %s is scoped to WorkItem %s, not %s", p.PackageID, s.WorkItemID, workItemID).At("/scope/workItemId")
	case p.SourceEvents.GroupID != s.GroupID:
		return Errorf(CodeInvalidCommand, "context package %s cites events of Group %s outside its scope %s", p.PackageID, p.SourceEvents.GroupID, s.GroupID).At("/sourceEvents/groupId")
	}
	return nil
}
