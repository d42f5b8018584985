//! `LIEN_IMAGE_REPOSITORY` names the registry a release build's image is pushed to
//! (`lien::manifests::IMAGE_REPOSITORY`, read with `option_env!`): a change of it must rebuild.
fn main() {
    println!("cargo:rerun-if-env-changed=LIEN_IMAGE_REPOSITORY");
}
