// Package jobinput holds the rules of a job's input document that name
// stored objects: "input_keys" maps names a runner knows to object keys under
// the tenant's prefix, "outputs" lists named outputs. Submission checks them
// before a job exists and the assets adapter presigns from them, so both
// read one definition of what a tenant may name.
package jobinput
