package protocol

// A Command's signed bytes are written once, from the typed value, the
// way an Event's are (signevent.go): the envelope member by member in RFC
// 8785 order, the payload canonicalized in one pass, the signature's value
// put in before the signature object's closing brace. A Command that
// carries extensions (offline-buffered ones, rare) takes the general path
// (signTyped). TestSignedCommandProperty holds both paths to the same
// bytes.

// SignedCommand signs cmd with k and returns its JCS bytes, ready to send.
// It fills signature alg, keyId and createdAt (= issuedAt) and sets
// cmd.Signature to the result, so a retry can resend the same bytes.
func SignedCommand(cmd *Command, k PrivateKey) ([]byte, error) {
	if len(cmd.Extensions) > 0 {
		return signedCommandGeneral(cmd, k)
	}
	cmd.Signature = Signature{Alg: SignatureAlgEd25519, KeyID: k.KeyID, CreatedAt: cmd.IssuedAt}
	if err := k.check(); err != nil {
		return nil, err
	}
	buf, cut, err := appendUnsignedCommand(make([]byte, 0, 2*len(cmd.Payload)+512+valueMember), cmd)
	if err != nil {
		return nil, err
	}
	buf, cmd.Signature.Value = spliceValue(k, buf, cut)
	cmd.Signature.CreatedAt = NewTime(cmd.IssuedAt.Time)
	return buf, nil
}

// signedCommandGeneral is SignedCommand by way of a parsed document.
func signedCommandGeneral(cmd *Command, k PrivateKey) ([]byte, error) {
	return signByDocument(cmd, &cmd.Signature, k, "issuedAt", cmd.IssuedAt)
}

// appendUnsignedCommand appends the signing input of cmd (no extensions)
// signed by cmd.Signature (alg, keyId; createdAt is issuedAt) and returns
// the offset of the signature object's closing brace.
func appendUnsignedCommand(dst []byte, cmd *Command) ([]byte, int, error) {
	at, err := stampOf(cmd.IssuedAt, "/issuedAt")
	if err != nil {
		return nil, 0, err
	}
	w := envelopeWriter{b: dst}
	w.member(`{"actionId":`)
	w.str(cmd.ActionID)
	w.actor(cmd.Actor)
	if cmd.CooperationOverrideGrantID != "" {
		w.member(`,"cooperationOverrideGrantId":`)
		w.str(cmd.CooperationOverrideGrantID)
	}
	w.optUint(`,"coordinatorEpoch":`, cmd.CoordinatorEpoch)
	w.member(`,"correlationId":`)
	w.str(cmd.CorrelationID)
	w.optUint(`,"expectedRevision":`, cmd.ExpectedRevision)
	if cmd.GroupID != "" {
		w.member(`,"groupId":`)
		w.str(cmd.GroupID)
	}
	w.member(`,"issuedAt":"`)
	w.member(at)
	w.member(`"`)
	w.optUint(`,"membershipEpoch":`, cmd.MembershipEpoch)
	w.member(`,"payload":`)
	if w.err == nil {
		if cmd.Payload == nil {
			w.b = append(w.b, "null"...)
		} else {
			w.b, w.err = appendCanonicalText(w.b, cmd.Payload, 1, DefaultMaxDepth)
		}
	}
	w.member(`,"protocolVersion":`)
	w.str(cmd.ProtocolVersion)
	w.optUint(`,"sessionEpoch":`, cmd.SessionEpoch)
	cut := w.signature(cmd.Signature, at)
	w.member(`,"type":`)
	w.str(string(cmd.Type))
	w.member(`}`)
	if w.err != nil {
		return nil, 0, w.err
	}
	return w.b, cut, nil
}

func (w *envelopeWriter) optUint(member string, v *uint64) {
	if v != nil {
		w.member(member)
		w.uint(*v)
	}
}
