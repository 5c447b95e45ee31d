// Java's RFC 2253 form of certificate subjects, for tests/tls_principal_java.rs
// (scripts/kafka-tool.sh tests/java/X500Names.java FILE.pem...): prints, one
// line per file, getSubjectX500Principal().getName(), which is the name
// Kafka's DefaultKafkaPrincipalBuilder gives an mTLS client (DEFAULT rules).
import java.io.FileInputStream;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;

public class X500Names {
    public static void main(String[] args) throws Exception {
        CertificateFactory f = CertificateFactory.getInstance("X.509");
        for (String path : args) {
            try (FileInputStream in = new FileInputStream(path)) {
                X509Certificate c = (X509Certificate) f.generateCertificate(in);
                System.out.println(c.getSubjectX500Principal().getName());
            }
        }
    }
}
